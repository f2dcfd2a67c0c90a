/**
 * scripts/sandbox-image/smoke.sh run through Fountain's own exec against a runner sandbox: a real
 * server on PostgreSQL, a real daemon dialling it over loopback, the process backend, and the
 * RunnerAdapter the server's registry holds. It passes, or names exactly what this machine lacks.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { accessSync, constants, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { openProcessBackend } from '../src/runner/backends/process/index.ts';
import { runDaemon, type DaemonHandle } from '../src/runner/daemon.ts';
import { mintRunnerName, type Handle, type SandboxAdapter } from '../src/sandbox/index.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../src/server/store/testing.ts';
import { parseSmokeOutput, runImageSmoke, smokeCommand } from '../scripts/sandbox-image/run-smoke.ts';

/** What the provision pipeline cannot do without, on any machine. */
const REQUIRED = ['identity', 'home', 'bash', 'git', 'node', 'npm', 'npm-global'];
/** Check name → the command it looks for; the image bakes these, a developer machine may not. */
const BAKED: ReadonlyArray<readonly [string, string]> = [
  ['claude', 'claude'],
  ['codex', 'codex'],
  ['gemini', 'gemini'],
  ['bun', 'bun'],
  ['opencode', 'opencode'],
  ['claude-agent-acp', 'claude-agent-acp'],
  ['codex-acp', 'codex-acp'],
];

const executable = (p: string) => {
  try {
    accessSync(p, constants.X_OK);
    return statSync(p).isFile();
  } catch {
    return false;
  }
};

async function until<T>(check: () => T | undefined, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('image smoke through exec on a runner sandbox', () => {
  let tmp: string;
  let schema: string;
  let srv: RunningServer;
  let daemon: DaemonHandle;
  let adapter: SandboxAdapter;
  let handle: Handle;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-smoke-')));
    schema = uniqueSchemaName();
    const logger = pino({ level: 'silent' });
    srv = await startServer({
      dataDir: join(tmp, 'server'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
      logger,
      acceptRunnerSocket,
    });
    const backend = openProcessBackend({ root: join(tmp, 'sandboxes'), logger });
    assert.ok(backend.ok, String(!backend.ok && backend.error));
    daemon = runDaemon({
      name: 'smoke',
      root: join(tmp, 'sandboxes'),
      backend: backend.value,
      baseUrl: srv.url,
      apiKey: srv.bootstrapKey!,
      logger,
      version: 'test',
    });
    const info = await until(() => srv.host.online()[0], 'the runner to connect');
    adapter = srv.registry.adapterFor('runner');
    const name = mintRunnerName(info.runnerId);
    assert.ok(name.ok);
    const created = await adapter.lifecycle.create(name.value);
    assert.ok(created.ok, JSON.stringify(!created.ok && created.error));
    handle = created.value;
  });

  after(async () => {
    if (handle) await adapter.lifecycle.destroy(handle);
    await daemon?.stop();
    await srv?.stop();
    if (schema) await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('passes every required check, and fails exactly the baked tools this machine lacks', async (t) => {
    const env = await adapter.processes.exec(handle, 'bash', ['-c', 'printf "%s\\n%s" "$PATH" "$HOME"'], {});
    assert.ok(env.ok);
    const [path, home] = Buffer.from(env.value.output).toString().split('\n') as [string, string];
    const onPath = (cmd: string) => path.split(delimiter).some((d) => d !== '' && executable(join(d, cmd)));
    const present = (check: string, cmd: string) =>
      onPath(cmd) || (['bun', 'opencode'].includes(check) && executable(join(home, '.bun/bin', cmd)));
    const missing = BAKED.filter(([check, cmd]) => !present(check, cmd)).map(([check]) => check);

    const run = await runImageSmoke(adapter, handle, { timeoutMs: 600_000 });
    assert.ok(run.ok, JSON.stringify(!run.ok && run.error));
    const { output, checks, verdict, exitCode } = run.value;
    const why = `\n${output}`;
    t.diagnostic(output.trim().split('\n').at(-1)!);

    for (const name of REQUIRED) assert.equal(checks.get(name)?.ok, true, `${name} must pass here${why}`);
    assert.match(output, new RegExp(`^user=\\S+ home=${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} pwd=`, 'm'));
    assert.match(
      checks.get('npm-global')!.detail,
      new RegExp(`into ${home}/\\.npm-global as `),
      'the sandbox prefix took the install',
    );
    for (const [check] of BAKED) {
      const line = checks.get(check);
      assert.ok(line, `${check} was checked${why}`);
      if (missing.includes(check)) assert.match(line.detail, /not found/, `${check} is reported missing${why}`);
      else assert.equal(line.ok, true, `${check} is present and answers --version${why}`);
    }
    assert.equal(checks.size, REQUIRED.length + BAKED.length, `no other checks${why}`);
    if (missing.length === 0) {
      assert.deepEqual([verdict, exitCode], [{ kind: 'ok' }, 0], why);
    } else {
      assert.deepEqual(verdict, { kind: 'failed', count: missing.length, failed: missing }, why);
      assert.equal(exitCode, 1);
    }
    // The probe package left nothing behind in the global prefix.
    assert.equal(executable(join(home, '.npm-global/bin/fountain-smoke-probe')), false);
  });

  it('fails the identity check for another expected user, and the install for an unwritable prefix', async () => {
    const run = await runImageSmoke(adapter, handle, {
      env: [
        ['SMOKE_EXPECT_USER', 'sprite-that-is-not-here'],
        ['npm_config_prefix', '/dev/null/npm-global'],
      ],
      timeoutMs: 600_000,
    });
    assert.ok(run.ok);
    const { checks, verdict, output } = run.value;
    assert.equal(checks.get('identity')?.ok, false, output);
    assert.match(checks.get('identity')!.detail, /expected sprite-that-is-not-here/);
    assert.equal(checks.get('npm-global')?.ok, false, output);
    assert.match(checks.get('npm-global')!.detail, /npm install -g exited [1-9]/);
    assert.equal(verdict.kind, 'failed');
    assert.ok(
      verdict.kind === 'failed' && verdict.failed.includes('identity') && verdict.failed.includes('npm-global'),
    );
  });

  it('reads verdicts and check lines, and ships the script as one base64 line', () => {
    assert.deepEqual(parseSmokeOutput('ok a: x\nFOUNTAIN_IMAGE_SMOKE_OK\n').verdict, { kind: 'ok' });
    assert.deepEqual(parseSmokeOutput('FAIL bun: gone\nFOUNTAIN_IMAGE_SMOKE_FAILED 1 (bun)\n').verdict, {
      kind: 'failed',
      count: 1,
      failed: ['bun'],
    });
    assert.deepEqual(parseSmokeOutput('ok a: x\n').verdict, { kind: 'none' });
    const { cmd, args } = smokeCommand(Buffer.from('echo hi\n'));
    assert.equal(cmd, 'bash');
    assert.equal(args.length, 2);
    assert.ok(args[1]!.includes(`'${Buffer.from('echo hi\n').toString('base64')}'`));
  });
});

describe("smoke-in.ts: the build scripts' smoke in a new hosted sandbox (E2B stub)", () => {
  it('creates a sandbox through the configured adapter, prints the verdict, and destroys the sandbox', async () => {
    const { E2BStub } = await import('./stubs/e2b/server.ts');
    const { execFile } = await import('node:child_process');
    const key = 'e2b_smoke_key';
    const stub = await E2BStub.start({ apiKey: key });
    try {
      const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', fileURLToPath(new URL('../scripts/sandbox-image/smoke-in.ts', import.meta.url)), 'e2b'],
          {
            env: {
              ...process.env,
              E2B_API_KEY: key,
              E2B_BASE_URL: stub.apiUrl,
              E2B_SANDBOX_URL: stub.sandboxUrl,
              E2B_USER: 'sprite',
              SMOKE_EXPECT_USER: '',
            },
            timeout: 600_000,
          },
          (e, stdout, stderr) => resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stdout, stderr }),
        ),
      );
      const { verdict, checks } = parseSmokeOutput(run.stdout);
      const why = `\n${run.stdout}\n${run.stderr}`;
      assert.match(run.stderr, /^created fountain-imgsmoke-[0-9a-f]{8} on e2b$/m, why);
      assert.match(run.stderr, /^destroyed fountain-imgsmoke-[0-9a-f]{8}$/m, why);
      for (const name of ['bash', 'git', 'node', 'npm']) assert.equal(checks.get(name)?.ok, true, `${name}${why}`);
      assert.notEqual(verdict.kind, 'none', why);
      assert.equal(run.code, verdict.kind === 'ok' ? 0 : 1, why);
    } finally {
      await stub.stop();
    }
  });
});
