/**
 * A new user's first minutes, as real processes: `fountain up` on a fresh home, then
 * `fountain chat demo` with a permission question answered at the terminal; Ctrl-C stops it all.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const bin = join(import.meta.dirname, '..', 'bin', 'fountain.js');

function run(args: string[], env: NodeJS.ProcessEnv, input?: string) {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...env, FOUNTAIN_LOG_FORMAT: 'json' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  if (input !== undefined) child.stdin.end(input);
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, exited, out: () => out, err: () => err };
}

async function until(check: () => boolean, what: string, ms = 180_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('fountain up, then fountain chat demo: stages, a permission answered, the streamed answer, memory', {
  timeout: 300_000,
}, async () => {
  const home = mkdtempSync(join(tmpdir(), 'fountain-up-'));
  const env = { FOUNTAIN_HOME: home, FOUNTAIN_API_KEY: '', FOUNTAIN_BASE_URL: '', FOUNTAIN_PROFILE: '' };
  // The sandboxes' npm cache is the one named (a sandbox installing an agent reads and fills it).
  const npmCache = join(home, 'npm-cache');
  const up = run(['up', '--port', '0', '--npm-cache', npmCache], env);
  try {
    await until(() => up.out().includes('Ctrl-C stops everything'), `fountain up (${up.err()})`);
    assert.match(up.out(), /demo agent: created/);
    assert.match(up.out(), /signin\/link\?token=/);
    assert.ok(existsSync(join(home, 'credentials')));

    const chat = run(
      ['chat', 'demo'],
      env,
      'run: echo permission-works "$npm_config_cache"\n1\nremember: the sky is green\nrecall\n',
    );
    const code = await chat.exited;
    const out = chat.out();
    assert.equal(code, 0, `${out}\n${chat.err()}`);
    assert.match(out, /starting a sandbox/);
    assert.match(out, /sandbox ready/);
    assert.match(out, /permission requested/);
    assert.match(out, /\[1\] Allow once/);
    assert.ok(out.includes(`permission-works ${npmCache}\n`), out);
    assert.match(out, /I remember:\n- the sky is green/);

    // The demo agent keeps a warm pool of one: the conversation's sandbox and the next conversation's.
    const sandboxes = () => readdirSync(join(home, 'runners', 'local', 'sandboxes')).filter((n) => !n.startsWith('.'));
    await until(() => sandboxes().length === 2, `the conversation's sandbox and one warm (${sandboxes()})`);
  } finally {
    up.child.kill('SIGINT');
    const code = await up.exited;
    assert.equal(code, 0, up.err());
  }
});

test('fountain up prints the owner key in full only on the start that created it', { timeout: 120_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), 'fountain-up-key-'));
  const env = { FOUNTAIN_HOME: home, FOUNTAIN_API_KEY: '', FOUNTAIN_BASE_URL: '', FOUNTAIN_PROFILE: '' };
  const startUp = async () => {
    const up = run(['up', '--port', '0', '--no-demo'], env);
    try {
      await until(() => up.out().includes('Ctrl-C stops everything'), `fountain up (${up.err()})`, 60_000);
      return up.out();
    } finally {
      up.child.kill('SIGINT');
      assert.equal(await up.exited, 0, up.err());
    }
  };
  const first = await startUp();
  const key = /owner API key: (ftn_[0-9a-f]{64})/.exec(first)?.[1];
  assert.ok(key, first);
  const second = await startUp();
  assert.ok(!second.includes(key), `the second start printed the key again:\n${second}`);
  assert.match(second, new RegExp(`owner API key: ${key.slice(0, 8)}… \\(in full in .*bootstrap`));
});
