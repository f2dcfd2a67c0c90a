/**
 * Conformance group "Streaming" plus stdin round trips,
 * a real EOF, spawn acknowledged before it returns, and totality on bad arguments.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { SANDBOX_ERROR_CODES } from '../errors.ts';
import { isTransient } from '../retry.ts';
import type { Command } from '../types.ts';
import type { SuiteContext } from './context.ts';
import { expectCode, expectErr, isResult, unwrap, utf8 } from './context.ts';
import { check } from './define.ts';
import { FrameCollector } from './frames.ts';

export const streamingGroup = (ctx: SuiteContext): void => {
  describe('streaming', () => {
    check(ctx, '12. spawn_ok: stdout with the ref, then exit 0, then no second terminal frame', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnOk);
      const out = await frames.nextStdout(command.ref, ctx.timeoutMs);
      assert.equal(out.ref, command.ref);
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.deepEqual(
        { type: end.type, code: end.type === 'exit' ? end.code : undefined },
        { type: 'exit', code: 0 },
        frames.dump(),
      );
      await frames.expectSettled(command.ref);
    });

    check(ctx, '13. spawn_drop: stdout, then error with the ref, and never an exit', async (t) => {
      const fx = ctx.opts.fixtures.spawnDrop;
      if (!fx) {
        t.skip('no spawn_drop fixture');
        return;
      }
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, fx);
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.equal(end.type, 'error', `a closed stream must end in error, never a synthesized exit: ${frames.dump()}`);
      if (end.type === 'error')
        assert.ok(isTransient(end.error), `closed_before_exit is transient: ${inspect(end.error)}`);
      await frames.expectSettled(command.ref, (f) => f.type === 'exit', 'an exit frame');
    });

    check(ctx, '14. write_stdin after exit is command_exited', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnOk, { stdin: true });
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.equal(end.type === 'exit' && end.code, 0, frames.dump());
      expectCode(
        await ctx.adapter.processes.writeStdin(command, utf8('late\n')),
        'command_exited',
        'write_stdin after exit',
      );
      await frames.expectSettled(command.ref);
    });

    check(ctx, '15. spawn_stay echoes stdin; close_stdin ends it with exit 0', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      unwrap(await ctx.adapter.processes.writeStdin(command, utf8('ping\n')), 'write_stdin(ping)');
      await frames.waitForText(command.ref, 'ping', ctx.timeoutMs);
      unwrap(await ctx.adapter.processes.closeStdin(command), 'close_stdin');
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.equal(end.type === 'exit' && end.code, 0, frames.dump());
      await frames.expectSettled(command.ref);
    });

    check(ctx, '16. stop_command is ok, and ok again', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      unwrap(await ctx.adapter.processes.stopCommand(command), 'stop_command');
      unwrap(await ctx.adapter.processes.stopCommand(command), 'stop_command again');
      unwrap(
        await ctx.adapter.processes.stopCommand({ provider: command.provider, ref: 'conformance-never-spawned' }),
        'stop_command(unknown ref)',
      );
      frames.assertWellFormed(command.ref);
    });

    check(ctx, 'stdin round-trips in order and close_stdin is a real EOF', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true });
      await frames.nextStdout(command.ref, ctx.timeoutMs);
      const writes = ['alpha-1\n', 'beta-\u03b2-2\n', 'gamma-3\n'];
      for (const w of writes)
        unwrap(await ctx.adapter.processes.writeStdin(command, utf8(w)), `write_stdin(${JSON.stringify(w)})`);
      const seen = await frames.waitForText(command.ref, 'gamma-3', ctx.timeoutMs);
      const at = writes.map((w) => seen.indexOf(w.trimEnd()));
      assert.ok(
        at.every((i) => i >= 0),
        `every write echoed: ${JSON.stringify(seen)}`,
      );
      assert.deepEqual(
        [...at].sort((x, y) => x - y),
        at,
        `echoes in write order: ${JSON.stringify(seen)}`,
      );
      // EOF is the only thing that ends spawn_stay: an exit 0 proves close_stdin delivered it.
      unwrap(await ctx.adapter.processes.closeStdin(command), 'close_stdin');
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.equal(end.type === 'exit' && end.code, 0, frames.dump());
      await frames.expectSettled(command.ref);
      expectCode(
        await ctx.adapter.processes.writeStdin(command, utf8('after-eof\n')),
        'command_exited',
        'write_stdin after EOF exit',
      );
      const again = await ctx.adapter.processes.closeStdin(command);
      assert.ok(
        isResult(again) && (again.ok || again.error.code === 'command_exited'),
        `close_stdin after exit: ${inspect(again)}`,
      );
    });

    check(ctx, 'spawn is acknowledged before it returns: an immediate write reaches the process', async () => {
      const h = await ctx.sandbox();
      const { command, frames } = await ctx.spawn(h, ctx.opts.fixtures.spawnStay, { stdin: true });
      // No waiting for output first: the process must already exist when spawn resolves.
      unwrap(await ctx.adapter.processes.writeStdin(command, utf8('ack-probe\n')), 'write_stdin straight after spawn');
      await frames.waitForText(command.ref, 'ack-probe', ctx.timeoutMs);
      unwrap(await ctx.adapter.processes.closeStdin(command), 'close_stdin');
      const end = await frames.terminal(command.ref, ctx.timeoutMs);
      assert.equal(end.type === 'exit' && end.code, 0, frames.dump());
      await frames.expectSettled(command.ref);
    });

    check(ctx, 'spawn never rejects on bad arguments; an accepted spawn still ends in one terminal frame', async () => {
      const h = await ctx.sandbox();
      const cases: Array<[string, string, readonly string[]]> = [
        ['empty cmd', '', []],
        ['nonexistent command', 'fountain-conformance-no-such-command', []],
        ['NUL byte in an argument', ctx.opts.fixtures.spawnOk.cmd, [...ctx.opts.fixtures.spawnOk.args, 'a\u0000b']],
      ];
      for (const [what, cmd, args] of cases) {
        const frames = new FrameCollector();
        let res;
        try {
          res = await ctx.adapter.processes.spawn(h, cmd, args, {
            ...ctx.opts.spawnOpts,
            owner: frames.sink,
            stdin: true,
          });
        } catch (thrown) {
          assert.fail(`spawn with ${what} rejected: ${inspect(thrown)}`);
        }
        assert.ok(isResult(res), `spawn with ${what} must resolve to a Result, got ${inspect(res)}`);
        if (!res.ok) {
          assert.ok(
            (SANDBOX_ERROR_CODES as readonly string[]).includes(res.error.code),
            `${what}: ${inspect(res.error)}`,
          );
          continue;
        }
        ctx.trackCommand(res.value);
        // Whatever became of it, it must not hang open: close stdin, then expect one terminal frame.
        await ctx.adapter.processes.closeStdin(res.value);
        await frames.terminal(res.value.ref, ctx.timeoutMs);
        await frames.expectSettled(res.value.ref);
      }
    });

    check(ctx, 'stdin ops on an unknown command resolve to results', async () => {
      const a = ctx.adapter;
      const ghost: Command = { provider: a.provider, ref: 'conformance-no-such-ref' };
      expectErr(await a.processes.writeStdin(ghost, utf8('x')), 'write_stdin(unknown command)');
      assert.ok(isResult(await a.processes.closeStdin(ghost)), 'close_stdin(unknown command) resolves to a Result');
    });
  });
};
