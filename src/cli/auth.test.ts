import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../server/start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../server/store/testing.ts';
import { readCredentials } from './credentials.ts';

const BIN = new URL('../../bin/fountain.js', import.meta.url).pathname;

function fountain(
  args: string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: {
        ...process.env,
        FOUNTAIN_API_KEY: '',
        FOUNTAIN_BASE_URL: '',
        FOUNTAIN_PROFILE: '',
        FOUNTAIN_LOG_FORMAT: 'json',
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(stdin ?? '');
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('fountain auth login (real process, real server)', () => {
  let dir: string;
  let home: string;
  let schema: string;
  let srv: RunningServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-login-'));
    home = join(dir, 'home');
    schema = uniqueSchemaName();
    srv = await startServer({
      dataDir: join(dir, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
      acceptRunnerSocket: () => assert.fail('no runner in this test'),
    });
  });
  after(async () => {
    await srv?.stop();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('verifies the key and writes it under the profile to a 0600 credentials file', async () => {
    const r = await fountain(
      ['auth', 'login', '--base-url', `${srv.url}/`, '--key', srv.bootstrapKey!, '--profile', 'work'],
      {
        FOUNTAIN_HOME: home,
      },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Logged in to http:\/\/127\.0\.0\.1:\d+ as owner; saved profile "work"/);
    const file = join(home, 'credentials');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(home).mode & 0o777, 0o700);
    assert.deepEqual(readCredentials(file), { work: { base_url: srv.url, api_key: srv.bootstrapKey } });
  });

  it('reads the key from stdin when it is not a terminal, into the default profile', async () => {
    const r = await fountain(
      ['auth', 'login', '--base-url', srv.url],
      { FOUNTAIN_HOME: home },
      `${srv.bootstrapKey}\n`,
    );
    assert.equal(r.code, 0, r.stderr);
    const all = readCredentials(join(home, 'credentials'));
    assert.deepEqual(Object.keys(all).sort(), ['default', 'work']);
    assert.equal(all.default?.api_key, srv.bootstrapKey);
  });

  it('refuses a key the server does not know and saves nothing', async () => {
    const other = join(dir, 'other-home');
    const r = await fountain(['auth', 'login', '--base-url', srv.url, '--key', `ftn_${'e'.repeat(64)}`], {
      FOUNTAIN_HOME: other,
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /refused the key \(api_key_invalid/);
    assert.equal(existsSync(join(other, 'credentials')), false);
  });

  it('rejects a malformed key or base URL with exit 2 before any request', async () => {
    const other = join(dir, 'other-home');
    const badKey = await fountain(['auth', 'login', '--base-url', srv.url, '--key', 'ftn_short'], {
      FOUNTAIN_HOME: other,
    });
    assert.equal(badKey.code, 2);
    assert.match(badKey.stderr, /--key must be ftn_/);
    const badUrl = await fountain(['auth', 'login', '--base-url', 'ftp://x', '--key', srv.bootstrapKey!], {
      FOUNTAIN_HOME: other,
    });
    assert.equal(badUrl.code, 2);
    assert.match(badUrl.stderr, /--base-url must be/);
    assert.equal(existsSync(join(other, 'credentials')), false);
  });
});
