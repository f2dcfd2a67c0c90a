/**
 * Conformance group "Robustness": a broken transport is never `not_found`, secrets never
 * leak, and run-wide checks over every call and frame the suite made.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { capabilitiesOf } from '../adapter.ts';
import { describeError } from '../errors.ts';
import type { SandboxError } from '../errors.ts';
import { isTransient } from '../retry.ts';
import { SANDBOX_HOME } from '../home.ts';
import type { SuiteContext } from './context.ts';
import { expectErr, isResult, utf8 } from './context.ts';
import { check } from './define.ts';
import { FrameCollector } from './frames.ts';

/** Every way a value might be rendered into a log line or a response body. */
const renderings = (v: unknown): string[] => {
  const out = [inspect(v, { depth: Infinity, showHidden: true, getters: true }), inspect(v, { depth: Infinity })];
  try {
    out.push(JSON.stringify(v) ?? '');
  } catch (e) {
    out.push(String(e));
  }
  try {
    out.push(String(v));
  } catch {
    // Objects without a string conversion simply cannot leak through one.
  }
  if (typeof v === 'object' && v !== null && typeof (v as { code?: unknown }).code === 'string') {
    out.push(describeError(v as SandboxError));
  }
  return out;
};

const assertNoSecret = (secret: string, v: unknown, what: string): void => {
  for (const r of renderings(v)) assert.ok(!r.includes(secret), `the secret leaks through ${what}: ${r.slice(0, 200)}`);
};

export const robustnessGroup = (ctx: SuiteContext): void => {
  describe('robustness', () => {
    check(ctx, 'get through a broken transport is transient, never not_found', async (t) => {
      if (!ctx.opts.brokenTransport) {
        t.skip('no brokenTransport probe');
        return;
      }
      const broken = await ctx.opts.brokenTransport();
      try {
        const a = ctx.recorder.wrap(broken.adapter);
        const e = expectErr(await a.lifecycle.get(broken.handle), 'get through a broken transport');
        assert.notEqual(e.code, 'not_found', 'a transport failure is not definitive absence');
        assert.ok(isTransient(e), `a transport failure is transient: ${inspect(e)}`);
        const fx = ctx.opts.fixtures.execOk;
        expectErr(await a.processes.exec(broken.handle, fx.cmd, fx.args), 'exec through a broken transport');
        const frames = new FrameCollector();
        const spawned = await a.processes.spawn(broken.handle, fx.cmd, fx.args, {
          ...ctx.opts.spawnOpts,
          owner: frames.sink,
        });
        assert.ok(isResult(spawned), 'spawn through a broken transport resolves to a Result');
        if (capabilitiesOf(a, broken.handle).has('terminate_session') && a.processes.terminateSession) {
          const term = await a.processes.terminateSession(broken.handle, 'conformance-session', { timeoutMs: 1000 });
          assert.ok(
            isResult(term) && !term.ok,
            `terminate_session cannot be confirmed through a broken transport: ${inspect(term)}`,
          );
        }
      } finally {
        await broken.cleanup?.();
      }
    });

    check(ctx, 'a secret in a handle never shows in inspect, JSON, errors or frames', async (t) => {
      if (!ctx.opts.secret) {
        t.skip('no secret probe');
        return;
      }
      const { handle, value } = await ctx.opts.secret();
      assert.ok(value.length >= 8, 'the probe secret should be long enough to be unambiguous');
      ctx.secretValue = value;
      assertNoSecret(value, handle, 'the handle');
      if (handle.private) assertNoSecret(value, handle.private, 'the private part');
      const a = ctx.adapter;
      const fx = ctx.opts.fixtures;
      const seen: Array<[string, unknown]> = [];
      const dir = ctx.opts.scratchDir ?? SANDBOX_HOME;
      seen.push(['get', await a.lifecycle.get(handle)]);
      seen.push(['exec', await a.processes.exec(handle, fx.execOk.cmd, fx.execOk.args)]);
      seen.push(['exec(bad)', await a.processes.exec(handle, '', [])]);
      seen.push(['write_file', await a.files.writeFile(handle, `${dir}/conformance/secret-probe.txt`, utf8('x'))]);
      seen.push(['list_sessions', await a.processes.listSessions(handle)]);
      seen.push([
        'attach',
        await a.processes.attach(handle, 'conformance-no-such-session', { owner: new FrameCollector().sink }),
      ]);
      if (a.checkpoints) seen.push(['create_checkpoint', await a.checkpoints.createCheckpoint(handle)]);
      const frames = new FrameCollector();
      const spawned = await a.processes.spawn(handle, fx.spawnOk.cmd, fx.spawnOk.args, {
        ...ctx.opts.spawnOpts,
        owner: frames.sink,
      });
      seen.push(['spawn', spawned]);
      if (spawned.ok) {
        ctx.trackCommand(spawned.value);
        await frames.terminal(spawned.value.ref, ctx.timeoutMs);
        seen.push(['write_stdin(after exit)', await a.processes.writeStdin(spawned.value, utf8('x'))]);
      }
      for (const [op, res] of seen) {
        assert.ok(isResult(res), `${op} resolves to a Result`);
        // Program output is the program's business; everything the adapter itself builds is checked.
        const shown =
          res.ok && typeof res.value === 'object' && res.value !== null && 'output' in res.value
            ? { exitCode: (res.value as unknown as { exitCode: unknown }).exitCode }
            : res;
        assertNoSecret(value, shown, `the result of ${op}`);
      }
      for (const f of frames.frames) if (f.type === 'error' || f.type === 'exit') assertNoSecret(value, f, 'a frame');
    });

    check(ctx, 'run-wide: no call threw or rejected, every result was a Result, frames well formed', async () => {
      const v = ctx.recorder.violations;
      assert.deepEqual(v, [], `violations: ${inspect(v, { depth: 4 })}`);
    });

    check(ctx, 'run-wide: no error returned in the whole run shows the secret', async (t) => {
      const secret = ctx.secretValue;
      if (!secret) {
        t.skip('no secret probe');
        return;
      }
      for (const e of ctx.recorder.errors()) assertNoSecret(secret, e, 'an error returned during the run');
    });
  });
};
