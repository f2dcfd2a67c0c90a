/**
 * Conformance group "Exec" plus totality: exec resolves to a
 * Result whatever the arguments, and a nonzero exit is data.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe } from 'node:test';
import { SANDBOX_ERROR_CODES } from '../errors.ts';
import type { SandboxResult } from '../errors.ts';
import type { ExecOptions, ExecResult } from '../types.ts';
import type { SuiteContext } from './context.ts';
import { expectErr, isResult, text, unwrap } from './context.ts';
import { check } from './define.ts';

const assertExecResult = (res: SandboxResult<ExecResult>, what: string): void => {
  assert.ok(isResult(res), `${what} must resolve to a Result, got ${inspect(res)}`);
  if (res.ok) {
    assert.ok(Number.isInteger(res.value.exitCode), `${what}: integer exit code, got ${inspect(res.value.exitCode)}`);
    assert.ok(res.value.output instanceof Uint8Array, `${what}: output is bytes`);
  } else {
    assert.ok(
      (SANDBOX_ERROR_CODES as readonly string[]).includes(res.error.code),
      `${what}: error outside the taxonomy: ${inspect(res.error)}`,
    );
  }
};

export const execGroup = (ctx: SuiteContext): void => {
  describe('exec', () => {
    check(ctx, '10. exec_ok collects output with code 0', async () => {
      const h = await ctx.sandbox();
      const fx = ctx.opts.fixtures.execOk;
      const r = unwrap(await ctx.adapter.processes.exec(h, fx.cmd, fx.args), 'exec(exec_ok)');
      assert.equal(r.exitCode, 0);
      assert.ok(
        text(r.output).includes(fx.expectedStdout),
        `output ${JSON.stringify(text(r.output))} lacks ${JSON.stringify(fx.expectedStdout)}`,
      );
    });

    check(ctx, '11. exec_fail is ok with the nonzero code, never an error', async () => {
      const h = await ctx.sandbox();
      const fx = ctx.opts.fixtures.execFail;
      const r = unwrap(await ctx.adapter.processes.exec(h, fx.cmd, fx.args), 'exec(exec_fail)');
      assert.notEqual(fx.nonzeroCode, 0, 'fixture exec_fail must name a nonzero code');
      assert.equal(r.exitCode, fx.nonzeroCode);
    });

    check(ctx, 'exec never rejects, whatever the arguments', async () => {
      const h = await ctx.sandbox();
      const ok = ctx.opts.fixtures.execOk;
      const bad: Array<[string, string, readonly string[], ExecOptions | undefined]> = [
        ['empty cmd', '', [], undefined],
        ['nonexistent command', 'fountain-conformance-no-such-command', ['--x'], undefined],
        ['NUL byte in an argument', ok.cmd, [...ok.args, 'a\u0000b'], undefined],
        ['NUL byte in cmd', 'ec\u0000ho', ['x'], undefined],
        ['huge argument', ok.cmd, [...ok.args, 'x'.repeat(200_000)], undefined],
        ['nonexistent dir', ok.cmd, ok.args, { dir: '/nonexistent/fountain-conformance/dir' }],
        [
          'weird env',
          ok.cmd,
          ok.args,
          {
            env: [
              ['', 'x'],
              ['A=B', 'c'],
              ['NUL\u0000', 'v\u0000'],
            ],
          },
        ],
        ['non-positive timeout', ok.cmd, ok.args, { timeoutMs: -1 }],
      ];
      for (const [what, cmd, args, opts] of bad) {
        let res: SandboxResult<ExecResult>;
        try {
          res = await ctx.adapter.processes.exec(h, cmd, args, opts);
        } catch (thrown) {
          assert.fail(`exec with ${what} rejected: ${inspect(thrown)}`);
        }
        assertExecResult(res, `exec with ${what}`);
      }
      // The sandbox is still usable afterwards.
      const r = unwrap(await ctx.adapter.processes.exec(h, ok.cmd, ok.args), 'exec(exec_ok) after bad calls');
      assert.equal(r.exitCode, 0);
    });

    check(ctx, 'exec in a never-created sandbox is an error, not a rejection', async () => {
      const fx = ctx.opts.fixtures.execOk;
      const res = await ctx.adapter.processes.exec(ctx.adapter.buildHandle(ctx.name()), fx.cmd, fx.args);
      expectErr(res, 'exec(never created)');
    });
  });
};
