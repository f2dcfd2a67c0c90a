import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../server/store/testing.ts';

const BIN = new URL('../../bin/fountain.js', import.meta.url).pathname;

interface Proc {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      ...process.env,
      FOUNTAIN_LOG_FORMAT: 'json',
      FOUNTAIN_BOOTSTRAP_KEY: '',
      SANDBOX_RUNNERS_ENABLED: '',
      ...env,
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function waitFor(re: RegExp, p: Proc, timeoutMs = 60_000): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = re.exec(p.stdout());
    if (m) return m;
    if (p.child.exitCode !== null) throw new Error(`exited ${p.child.exitCode}: ${p.stderr()}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}; stderr: ${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('fountain server as a real process', () => {
  let dir: string;
  let schema: string;
  let url: string;
  const procs: Proc[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-server-cli-'));
    schema = uniqueSchemaName();
    const c = new pg.Client({ connectionString: TEST_POSTGRES_URL });
    await c.connect();
    await c.query(`CREATE SCHEMA "${schema}"`);
    await c.end();
    url = `${TEST_POSTGRES_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  });
  after(async () => {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints the owner key once and the listening URL for --port 0, serves, and exits 0 on SIGTERM', async () => {
    const dataDir = join(dir, 'data');
    const p = run(['server', '--port', '0', '--data-dir', dataDir], { FOUNTAIN_DATABASE_URL: url });
    procs.push(p);
    const [, base] = await waitFor(/^fountain server listening on (http:\/\/127\.0\.0\.1:\d+)$/m, p);
    const [, key] = await waitFor(/^\s+(ftn_[0-9a-f]{64})$/m, p);
    assert.equal(readFileSync(join(dataDir, 'bootstrap-key'), 'utf8').trim(), key);
    assert.equal(statSync(join(dataDir, 'bootstrap-key')).mode & 0o777, 0o600);
    const health = await fetch(`${base}/api/health`);
    assert.equal(health.status, 200);
    const me = await fetch(`${base}/api/auth/me`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(((await me.json()) as any).data.role, 'owner');
    p.child.kill('SIGTERM');
    assert.deepEqual(await p.exited, { code: 0, signal: null });

    // A second start on the same database does not print a key again.
    const again = run(['server', '--port', '0', '--data-dir', dataDir], { FOUNTAIN_DATABASE_URL: url });
    procs.push(again);
    await waitFor(/^fountain server listening on /m, again);
    assert.doesNotMatch(again.stdout(), /ftn_/);
    again.child.kill('SIGINT');
    assert.deepEqual(await again.exited, { code: 0, signal: null });
  });

  it('refuses bad flags and a bad environment variable with exit 2 and a plain message', async () => {
    const badPort = run(['server', '--port', 'http', '--data-dir', join(dir, 'x')], {});
    procs.push(badPort);
    assert.equal((await badPort.exited).code, 2);
    assert.match(badPort.stderr(), /fountain server: --port must be a number/);
    const badEnv = run(['server', '--port', '0', '--data-dir', join(dir, 'y')], {
      FOUNTAIN_DATABASE_URL: url,
      SANDBOX_RUNNERS_ENABLED: 'perhaps',
    });
    procs.push(badEnv);
    assert.equal((await badEnv.exited).code, 2);
    assert.match(badEnv.stderr(), /fountain server: SANDBOX_RUNNERS_ENABLED: must be one of/);
  });
});
