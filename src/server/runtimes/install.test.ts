/**
 * The adapter install script against a real npm and a registry on loopback: a package the npm cache
 * holds installs without asking the registry, even when its cache lacks an optional dependency's metadata.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { installScript } from './table.ts';

const PKG = 'fountain-offline-probe';
/** opencode-ai's shape: one optional dependency per platform, most of them never installed here. */
const ELSEWHERE = 'fountain-offline-probe-elsewhere';

/** Runs a shell script without blocking the event loop (the registry is served from this process). */
function run(script: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const c = spawn('sh', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    c.stdout.on('data', (b: Buffer) => (output += b));
    c.stderr.on('data', (b: Buffer) => (output += b));
    c.on('close', (code) => resolve({ code, output }));
  });
}

describe('the adapter install script', () => {
  let tmp: string;
  let registry: Server;
  let url: string;
  const asked: string[] = [];

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fountain-install-'));
    const src = join(tmp, 'src', 'package');
    mkdirSync(src, { recursive: true });
    const manifest = {
      name: PKG,
      version: '1.0.0',
      bin: { [PKG]: 'cli.js' },
      optionalDependencies: { [ELSEWHERE]: '1.0.0' },
    };
    writeFileSync(join(src, 'package.json'), JSON.stringify(manifest));
    writeFileSync(join(src, 'cli.js'), '#!/usr/bin/env node\nconsole.log("1.0.0");\n', { mode: 0o755 });
    const tgz = join(tmp, 'probe.tgz');
    execFileSync('tar', ['czf', tgz, '-C', join(tmp, 'src'), 'package']);
    const tarball = readFileSync(tgz);
    registry = createServer((req, res) => {
      asked.push(`${req.method} ${req.url}`);
      if (req.url === `/${PKG}`) {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            name: PKG,
            'dist-tags': { latest: '1.0.0' },
            versions: {
              '1.0.0': {
                ...manifest,
                dist: {
                  tarball: `${url}/${PKG}/-/${PKG}-1.0.0.tgz`,
                  integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
                  shasum: createHash('sha1').update(tarball).digest('hex'),
                },
              },
            },
          }),
        );
      } else if (req.url === `/${PKG}/-/${PKG}-1.0.0.tgz`) {
        res.setHeader('content-type', 'application/octet-stream');
        res.end(tarball);
      } else {
        // As a registry mirror without the other platforms' packages answers: never cached by npm.
        res.statusCode = 404;
        res.end('{"error":"Not found"}');
      }
    });
    await new Promise<void>((r) => registry.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(registry.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise((r) => registry?.close(r));
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  /** A sandbox's environment as a runner sets it: its own HOME and global prefix, the given npm cache. */
  const sandboxEnv = (home: string, cache: string): Record<string, string> => ({
    PATH: `${home}/.local/bin:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: home,
    npm_config_prefix: join(home, '.npm-global'),
    npm_config_cache: cache,
    npm_config_registry: `${url}/`,
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    // What the namespace backend sets over a cache seeded from the runner's warm one.
    npm_config_prefer_offline: 'true',
  });

  it('installs from a warm cache without asking the registry, though an optional dependency was never cached', async () => {
    const cache = join(tmp, 'warm-cache');
    // The runner's warm-up (scripts/warm-agent-cache.ts): an online install through the cache.
    const warm = await run(`npm install -g --prefix '${join(tmp, 'warm')}' --no-progress ${PKG}@1.0.0`, {
      ...sandboxEnv(join(tmp, 'warm-home'), cache),
      npm_config_prefer_offline: 'false',
    });
    assert.equal(warm.code, 0, warm.output);
    assert.ok(asked.includes(`GET /${ELSEWHERE}`), `the warm-up asked for the optional dependency: ${asked}`);

    asked.length = 0;
    const home = join(tmp, 'sandbox');
    mkdirSync(home);
    const r = await run(installScript({ pkg: PKG, version: '1.0.0', bin: PKG }), sandboxEnv(home, cache));
    assert.equal(r.code, 0, r.output);
    assert.ok(existsSync(join(home, '.local', 'bin', PKG)), r.output);
    // A sandbox that cannot reach the registry waits out npm's retries on every such request (ten of
    // them for opencode-ai, over ten minutes), so none may be made.
    assert.deepEqual(asked, [], 'the install asked the registry nothing');
  });

  it('with a runtime store: installed there once, linked into every later sandbox without npm; a broken entry is replaced', async () => {
    const store = join(tmp, 'store');
    const script = installScript({ pkg: PKG, version: '1.0.0', bin: PKG });
    const inStore = (home: string) => ({
      ...sandboxEnv(home, join(tmp, 'store-cache')),
      FOUNTAIN_RUNTIME_STORE: store,
    });
    // Two sandboxes at once (a conversation and its warm-pool member): one entry, the other install dropped.
    const first = join(tmp, 'store-first');
    const twin = join(tmp, 'store-twin');
    mkdirSync(first);
    mkdirSync(twin);
    const [a, t] = await Promise.all([run(script, inStore(first)), run(script, inStore(twin))]);
    assert.equal(a.code, 0, a.output);
    assert.equal(t.code, 0, t.output);
    const entry = join(store, `${PKG}@1.0.0`);
    assert.ok(lstatSync(entry).isSymbolicLink(), 'the entry is a link made once the install finished');
    assert.ok(existsSync(join(entry, '.complete')));
    assert.deepEqual(
      readdirSync(store).sort(),
      [`${PKG}@1.0.0`, readlinkSync(entry)].sort(),
      'the second install was dropped',
    );
    assert.deepEqual(
      readdirSync(realpathSync(entry)).filter((n) => n.startsWith('.install-')),
      [],
      'no link inside the entry',
    );
    assert.ok(!existsSync(join(first, '.npm-global', 'lib', 'node_modules', PKG)), 'nothing installed in the sandbox');
    assert.equal(
      realpathSync(join(first, '.local', 'bin', PKG)),
      realpathSync(join(entry, 'lib', 'node_modules', PKG, 'cli.js')),
    );

    // No registry and an empty cache: only a link can succeed.
    const second = join(tmp, 'store-second');
    mkdirSync(second);
    const offline = {
      ...inStore(second),
      npm_config_registry: 'http://127.0.0.1:9/',
      npm_config_cache: join(tmp, 'no-cache'),
    };
    const b = await run(script, offline);
    assert.equal(b.code, 0, b.output);
    assert.match((await run(`${PKG} --version`, offline)).output, /1\.0\.0/);
    assert.equal(readdirSync(store).filter((n) => n.startsWith('.install-')).length, 1, 'still one install');

    // The install the entry named is gone: the next sandbox installs again and replaces the entry.
    rmSync(realpathSync(entry), { recursive: true });
    const third = join(tmp, 'store-third');
    mkdirSync(third);
    const c = await run(script, inStore(third));
    assert.equal(c.code, 0, c.output);
    assert.match((await run(`${PKG} --version`, inStore(third))).output, /1\.0\.0/);
    assert.ok(existsSync(join(entry, '.complete')), 'the entry names a whole install again');
  });

  it('still installs through the registry what the cache does not hold', async () => {
    asked.length = 0;
    const home = join(tmp, 'cold');
    mkdirSync(home);
    const r = await run(
      installScript({ pkg: PKG, version: '1.0.0', bin: PKG }),
      sandboxEnv(home, join(tmp, 'empty-cache')),
    );
    assert.equal(r.code, 0, r.output);
    assert.ok(existsSync(join(home, '.local', 'bin', PKG)), r.output);
    assert.ok(asked.includes(`GET /${PKG}`), `the registry was asked: ${asked}`);
  });
});
