/**
 * Conformance group "Sessions" (tests 17–18): attach and replay from byte zero, detaching,
 * session termination.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import type { SuiteContext } from './context.ts';
import { expectCode, text, unwrap, utf8 } from './context.ts';
import { check, lacks } from './define.ts';
import { FrameCollector } from './frames.ts';

const startsWith = (whole: Uint8Array, prefix: Uint8Array): boolean =>
  whole.byteLength >= prefix.byteLength && prefix.every((b, i) => whole[i] === b);

export const sessionsGroup = (ctx: SuiteContext): void => {
  describe('sessions', () => {
    check(ctx, '17. attach from a second subscriber replays from byte zero, then tails live output', async (t) => {
      if (lacks(t, ctx, 'attach')) return;
      const a = ctx.adapter;
      const h = await ctx.created();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true, detachable: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      unwrap(await a.processes.writeStdin(command, utf8('before-attach\n')), 'write_stdin(before-attach)');
      await frames.waitForText(command.ref, 'before-attach', ctx.timeoutMs);
      const preAttach = frames.bytes(command.ref);

      const sessions = unwrap(await a.processes.listSessions(h), 'list_sessions');
      assert.equal(sessions.length, 1, `one session in a fresh sandbox: ${inspect(sessions)}`);
      const session = sessions[0]!;
      assert.equal(typeof session.id, 'string');

      const second = new FrameCollector();
      const attached = unwrap(await a.processes.attach(h, session.id, { owner: second.sink, stdin: true }), 'attach');
      ctx.trackCommand(attached);
      assert.notEqual(attached.ref, command.ref, 'the attacher gets its own ref');
      assert.ok(!attached.replayFrom, `replay must start at byte zero, got replayFrom=${String(attached.replayFrom)}`);
      const replayed = await second.waitForOutput(
        attached.ref,
        (b) => b.byteLength >= preAttach.byteLength,
        ctx.timeoutMs,
        'the replay',
      );
      assert.ok(
        startsWith(replayed, preAttach),
        `replay ${JSON.stringify(text(replayed))} must begin with ${JSON.stringify(text(preAttach))}`,
      );
      const firstReplayed = await second.nextStdout(attached.ref, ctx.timeoutMs);
      assert.ok(
        startsWith(preAttach, firstReplayed.data),
        'the first replayed chunk is the first output byte for byte',
      );

      unwrap(await a.processes.writeStdin(command, utf8('after-attach\n')), 'write_stdin(original, after-attach)');
      await frames.waitForText(command.ref, 'after-attach', ctx.timeoutMs);
      await second.waitForText(attached.ref, 'after-attach', ctx.timeoutMs);

      unwrap(await a.processes.writeStdin(attached, utf8('from-attacher\n')), 'write_stdin(attacher)');
      await second.waitForText(attached.ref, 'from-attacher', ctx.timeoutMs);

      unwrap(await a.processes.closeStdin(command), 'close_stdin');
      for (const [c, f] of [
        [command, frames],
        [attached, second],
      ] as const) {
        const end = await f.terminal(c.ref, ctx.timeoutMs);
        assert.equal(end.type === 'exit' && end.code, 0, f.dump());
        await f.expectSettled(c.ref);
      }
    });

    check(ctx, 'stop_command only detaches: a detachable process keeps running and can be re-attached', async (t) => {
      if (lacks(t, ctx, 'attach')) return;
      const a = ctx.adapter;
      const h = await ctx.created();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true, detachable: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      unwrap(await a.processes.stopCommand(command), 'stop_command');
      const sessions = unwrap(await a.processes.listSessions(h), 'list_sessions');
      assert.equal(sessions.length, 1, `the session outlives its local end: ${inspect(sessions)}`);
      const again = new FrameCollector();
      const attached = unwrap(
        await a.processes.attach(h, sessions[0]!.id, { owner: again.sink, stdin: true }),
        'attach after stop_command',
      );
      ctx.trackCommand(attached);
      // Still alive: it echoes, and only EOF ends it, with exit 0 (a killed process would not echo).
      unwrap(await a.processes.writeStdin(attached, utf8('still-alive\n')), 'write_stdin after re-attach');
      await again.waitForText(attached.ref, 'still-alive', ctx.timeoutMs);
      unwrap(await a.processes.closeStdin(attached), 'close_stdin');
      const end = await again.terminal(attached.ref, ctx.timeoutMs);
      assert.equal(end.type === 'exit' && end.code, 0, again.dump());
      await again.expectSettled(attached.ref);
      frames.assertWellFormed(command.ref);
    });

    check(ctx, 'attach to an unknown session is not_found', async (t) => {
      if (lacks(t, ctx, 'attach')) return;
      const h = await ctx.sandbox();
      const frames = new FrameCollector();
      expectCode(
        await ctx.adapter.processes.attach(h, 'conformance-no-such-session', { owner: frames.sink }),
        'not_found',
        'attach(unknown session)',
      );
    });

    check(ctx, '18. terminate_session ends a detached session, twice ok, sandbox unharmed', async (t) => {
      if (lacks(t, ctx, 'terminate_session')) return;
      const a = ctx.adapter;
      assert.equal(
        typeof a.processes.terminateSession,
        'function',
        'terminate_session advertised but terminateSession is missing',
      );
      const h = await ctx.created();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true, detachable: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      const sessions = unwrap(await a.processes.listSessions(h), 'list_sessions');
      assert.equal(sessions.length, 1, `one session: ${inspect(sessions)}`);
      unwrap(await a.processes.stopCommand(command), 'stop_command');
      const timeoutMs = Math.min(ctx.timeoutMs, 30_000);
      unwrap(await a.processes.terminateSession!(h, sessions[0]!.id, { timeoutMs }), 'terminate_session');
      unwrap(await a.processes.terminateSession!(h, sessions[0]!.id, { timeoutMs }), 'terminate_session again');
      unwrap(await a.lifecycle.get(h), 'get after terminate');
      const fx = ctx.opts.fixtures.execOk;
      const r = unwrap(await a.processes.exec(h, fx.cmd, fx.args), 'exec_ok after terminate');
      assert.equal(r.exitCode, 0);
      frames.assertWellFormed(command.ref);
    });
  });
};
