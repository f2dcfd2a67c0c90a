/**
 * What a namespace sandbox gets of its runner's machine for an agent: the Fountain server's loopback
 * port (and no other loopback service), and an npm cache seeded from the runner's warm one that it
 * may use but not change. Needs root and bubblewrap (skipped otherwise, with the reason).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureLogger } from '../../testing.ts';
import type { OpResult } from '../../backend.ts';
import type { ProcessBackend } from '../process/index.ts';
import { namespaceSupportProblem, openNamespaceBackend } from './index.ts';

const problem = namespaceSupportProblem();
const unb64 = (s: string) => Buffer.from(s, 'base64').toString();
let nextId = 1;
const id = () => nextId++;
const value = <T extends object>(r: OpResult<T>): T => {
  if (!r.ok) assert.fail(`expected ok, got ${r.error.code}: ${r.error.detail}`);
  return r.value.result;
};
const octet = 20 + ((process.pid + 37) % 200);
const listen = (s: Server) =>
  new Promise<number>((r) => s.listen(0, '127.0.0.1', () => r((s.address() as AddressInfo).port)));

describe('namespace backend: the server and the npm cache from inside', { skip: problem ?? false }, () => {
  let dir: string;
  let backend: ProcessBackend;
  let server: Server;
  let other: Server;
  let serverPort: number;
  let otherPort: number;
  const cached = 'content the registry once sent\n';

  before(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ns-link-')));
    server = createServer((req, res) => res.end(`fountain server saw ${req.url}\n`));
    other = createServer((_req, res) => res.end('another loopback service\n'));
    serverPort = await listen(server);
    otherPort = await listen(other);
    const cache = join(dir, 'npm-cache');
    mkdirSync(join(cache, '_cacache', 'content-v2'), { recursive: true });
    writeFileSync(join(cache, '_cacache', 'content-v2', 'blob'), cached);
    const opened = openNamespaceBackend({
      root: join(dir, 'sandboxes'),
      logger: captureLogger().logger,
      subnet: `10.65.${octet}.0/24`,
      cgroupParent: `fountain-test-link-${process.pid}`,
      serverUrl: `http://127.0.0.1:${serverPort}`,
      npmCache: cache,
      graceMs: { destroy: 1000, suspend: 1000, stopAll: 1000 },
    });
    assert.ok(opened.ok, opened.ok ? '' : opened.error);
    backend = opened.value;
  });
  after(async () => {
    await backend?.stopAll();
    server?.close();
    other?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    for (const c of ['freezer', 'memory', 'pids']) {
      try {
        rmdirSync(join('/sys/fs/cgroup', c, `fountain-test-link-${process.pid}`));
      } catch {
        // never made
      }
    }
  });

  const sh = async (name: string, script: string) => {
    const r = value(
      await backend.exec({
        id: id(),
        op: 'exec',
        name,
        cmd: 'sh',
        args: ['-c', script],
        env: [],
        stderr_to_stdout: true,
      }),
    );
    return { output: unb64(r.output), code: r.code };
  };

  it('reaches the server at its own loopback address and port, and no other loopback service', async () => {
    value(await backend.create({ id: id(), op: 'create', name: 'agent' }));
    const seen = await sh('agent', `curl -sS -m 5 http://127.0.0.1:${serverPort}/api/gateway/x`);
    assert.equal(seen.output, 'fountain server saw /api/gateway/x\n');
    assert.equal(seen.code, 0);
    const refused = await sh('agent', `curl -sS -m 3 http://127.0.0.1:${otherPort}/`);
    assert.notEqual(refused.code, 0, refused.output);
    assert.doesNotMatch(refused.output, /another loopback service/);
  });

  it('starts its npm cache from the warm one, offline-first, and cannot change the warm one', async () => {
    value(await backend.create({ id: id(), op: 'create', name: 'npm' }));
    const r = await sh(
      'npm',
      'cat ~/.npm/_cacache/content-v2/blob; echo "offline=$npm_config_prefer_offline cache=$npm_config_cache"; ' +
        'echo poisoned > ~/.npm/_cacache/content-v2/blob || echo refused; ' +
        'touch ~/.npm/_cacache/content-v2/new && echo own-dir-writable',
    );
    assert.match(r.output, new RegExp(`^${cached}`));
    assert.match(r.output, /offline=true cache=\/home\/sprite\/\.npm/);
    assert.match(r.output, /refused/);
    assert.match(r.output, /own-dir-writable/);
    assert.equal(readFileSync(join(dir, 'npm-cache', '_cacache', 'content-v2', 'blob'), 'utf8'), cached);
  });
});
