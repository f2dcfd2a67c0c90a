/**
 * The self-hosted runner end to end: the conformance suite through the runner adapter, over a
 * real WebSocket from a real `fountain server`, to the real `fountain runner` with the process
 * backend; the daemon's give-up and retry rules against that server; a socket drop mid-session.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runConformanceSuite, SHELL_FIXTURES } from '../src/sandbox/conformance/index.ts';
import { mintRunnerName } from '../src/sandbox/index.ts';
import type { StreamFrame } from '../src/sandbox/index.ts';
import { RunnerAdapter } from '../src/providers/runner/index.ts';
import { startServer } from '../src/server/start.ts';
import type { RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;

interface Child {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

function runner(args: string[], env: Record<string, string>): Child {
  const child = spawn(process.execPath, [BIN, 'runner', ...args], {
    env: { ...process.env, FOUNTAIN_PROFILE: '', FOUNTAIN_LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  return { child, log: () => log, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
}

async function until<T>(check: () => T | Promise<T>, what: string, ms = 60_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function startTestServer(env: Record<string, string> = {}) {
  const schema = uniqueSchemaName();
  const dataDir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-srv-')));
  const server = await startServer({
    dataDir,
    port: 0,
    env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, ...env },
    databaseSchema: schema,
  });
  return {
    server,
    key: server.bootstrapKey!,
    async stop() {
      await server.stop();
      await dropSchema(schema);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const api = async (s: RunningServer, key: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(s.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as { data?: unknown; error?: string }) : null };
};

interface RunnerRow {
  id: string;
  name: string;
  online: boolean;
}
const runners = async (s: RunningServer, key: string): Promise<RunnerRow[]> =>
  (await api(s, key, 'GET', '/api/runners')).body!.data as RunnerRow[];

/** A loopback TCP proxy the test can sever, to drop a runner's socket while both ends live on. */
async function startProxy(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = connect(Number(port), hostname);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    cut: () => sockets.forEach((s) => s.destroy()),
    close: () => {
      sockets.forEach((s) => s.destroy());
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------------------------------------

let confServer: Awaited<ReturnType<typeof startTestServer>>;
let confRunner: Child;
let confRunnerId: string;
let confScratch: string;
let confAdapter: RunnerAdapter;

runConformanceSuite('runner adapter → real fountain server → real fountain runner (process backend)', {
  adapter: () => confAdapter,
  name: () => {
    const n = mintRunnerName(confRunnerId);
    if (!n.ok) throw new Error(n.error);
    return n.value;
  },
  timeoutMs: 20_000,
  fixtures: SHELL_FIXTURES,
  before: async () => {
    confServer = await startTestServer();
    confScratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-conf-')));
    confRunner = runner(['--name', 'conformance', '--root', join(confScratch, 'sandboxes')], {
      FOUNTAIN_API_KEY: confServer.key,
      FOUNTAIN_BASE_URL: confServer.server.url,
    });
    const row = await until(
      async () => (await runners(confServer.server, confServer.key)).find((r) => r.online),
      `the runner online (${confRunner.log()})`,
    );
    confRunnerId = row.id;
    confAdapter = new RunnerAdapter(confServer.server.host);
  },
  after: async () => {
    confRunner.child.kill('SIGINT');
    await confRunner.exited;
    await confServer.stop();
    rmSync(confScratch, { recursive: true, force: true });
  },
});

// ---------------------------------------------------------------------------------------------

describe('fountain runner against a real fountain server', () => {
  let s: Awaited<ReturnType<typeof startTestServer>>;
  let scratch: string;
  const children: Child[] = [];
  const start = (args: string[], env: Record<string, string>) => {
    const c = runner(args, env);
    children.push(c);
    return c;
  };

  /** A runner named `name` dialing `url`, online, and a sandbox created on it through the adapter. */
  const sandboxOn = async (name: string, url: string) => {
    const c = start(['--name', name, '--root', join(scratch, name)], {
      FOUNTAIN_API_KEY: s.key,
      FOUNTAIN_BASE_URL: url,
    });
    const row = await until(
      async () => (await runners(s.server, s.key)).find((r) => r.name === name && r.online),
      `${name} online`,
    );
    const adapter = new RunnerAdapter(s.server.host);
    const minted = mintRunnerName(row.id);
    assert.ok(minted.ok);
    const h = await adapter.lifecycle.create(minted.value);
    assert.ok(h.ok);
    return { c, row, adapter, h };
  };

  before(async () => {
    s = await startTestServer();
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-rules-')));
  });
  after(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await s.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('gives up when the key is refused (401) or is not full scope (403)', async () => {
    const bad = start(['--name', 'bad-key', '--root', join(scratch, 'a')], {
      FOUNTAIN_API_KEY: `ftn_${'0'.repeat(64)}`,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    assert.equal(await bad.exited, 1);
    assert.match(bad.log(), /API key refused/i);
    const created = await api(s.server, s.key, 'POST', '/api/auth/api-keys', { name: 'sandbox', scopes: ['sandbox'] });
    assert.equal(created.status, 201);
    const sandboxKey = (created.body!.data as { key: string }).key;
    const scoped = start(['--name', 'scoped', '--root', join(scratch, 'b')], {
      FOUNTAIN_API_KEY: sandboxKey,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    assert.equal(await scoped.exited, 1);
    assert.match(scoped.log(), /403/);
    assert.deepEqual(
      (await runners(s.server, s.key)).map((r) => r.name).filter((n) => n === 'bad-key' || n === 'scoped'),
      [],
    );
  });

  it('gives up when the server rejects the runner (400)', async () => {
    // A root over 1024 characters passes the daemon's own checks and fails the server's.
    const deep = join(scratch, ...Array.from({ length: 6 }, (_, i) => `${i}${'r'.repeat(200)}`));
    const c = start(['--name', 'too-deep', '--root', deep], {
      FOUNTAIN_API_KEY: s.key,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    assert.equal(await c.exited, 1);
    assert.match(c.log(), /rejected/i);
  });

  it('gives up when runners are switched off on the instance (404)', async () => {
    const off = await startTestServer({ SANDBOX_RUNNERS_ENABLED: 'false' });
    try {
      const c = start(['--name', 'nope', '--root', join(scratch, 'c')], {
        FOUNTAIN_API_KEY: off.key,
        FOUNTAIN_BASE_URL: off.server.url,
      });
      assert.equal(await c.exited, 1);
      assert.match(c.log(), /disabled/i);
    } finally {
      await off.stop();
    }
  });

  it('retries while the name is taken (409), connects when it frees, shows online then offline', async () => {
    const first = start(['--name', 'twin', '--root', join(scratch, 'd1')], {
      FOUNTAIN_API_KEY: s.key,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    await until(
      async () => (await runners(s.server, s.key)).find((r) => r.name === 'twin' && r.online),
      'the first twin online',
    );
    const second = start(['--name', 'twin', '--root', join(scratch, 'd2')], {
      FOUNTAIN_API_KEY: s.key,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    await until(() => /409|already connected/i.test(second.log()), 'the second twin refused with 409');
    assert.equal(second.child.exitCode, null, 'a 409 is retried, not given up');
    first.child.kill('SIGINT');
    assert.equal(await first.exited, 0);
    await until(
      () => (second.log().match(/runner: connected/g) ?? []).length >= 1,
      'the second twin connected after the first left',
      90_000,
    );
    assert.ok((await runners(s.server, s.key)).find((r) => r.name === 'twin')?.online);
    second.child.kill('SIGINT');
    assert.equal(await second.exited, 0);
    await until(
      async () => (await runners(s.server, s.key)).find((r) => r.name === 'twin' && !r.online),
      'twin offline',
    );
  });

  it('a deleted runner (4404) is told so and registers again as a new runner', async () => {
    const c = start(['--name', 'deleted', '--root', join(scratch, 'f')], {
      FOUNTAIN_API_KEY: s.key,
      FOUNTAIN_BASE_URL: s.server.url,
    });
    const row = await until(
      async () => (await runners(s.server, s.key)).find((r) => r.name === 'deleted' && r.online),
      'online',
    );
    assert.equal((await api(s.server, s.key, 'DELETE', `/api/runners/${row.id}`)).status, 204);
    const back = await until(
      async () => (await runners(s.server, s.key)).find((r) => r.name === 'deleted' && r.online && r.id !== row.id),
      'registered again',
      90_000,
    );
    assert.notEqual(back.id, row.id);
    c.child.kill('SIGINT');
    assert.equal(await c.exited, 0);
  });

  it('stdin larger than one frame (a prompt with ten 10 MB images) reaches the process whole, in order', async () => {
    const { c, adapter, h } = await sandboxOn('big-stdin', s.server.url);
    const frames: StreamFrame[] = [];
    const spawned = await adapter.processes.spawn(h.value, 'sh', ['-c', 'cksum'], {
      owner: (f) => frames.push(f),
      stdin: true,
    });
    assert.ok(spawned.ok);
    // 100 MB, more than a frame holds (64 MiB) even before its base64: every byte differs by position.
    const data = Buffer.alloc(100 * 1024 * 1024);
    for (let i = 0; i < data.length; i += 4) data.writeUInt32LE(i, i);
    const wrote = await adapter.processes.writeStdin(spawned.value, data);
    assert.ok(wrote.ok, JSON.stringify(wrote));
    assert.ok((await adapter.processes.closeStdin(spawned.value)).ok);
    await until(() => frames.find((f) => f.type === 'exit'), 'cksum to exit', 120_000);
    const out = frames
      .filter((f) => f.type === 'stdout')
      .map((f) => Buffer.from((f as { data: Uint8Array }).data).toString())
      .join('');
    const local = execFileSync('cksum', { input: data }).toString();
    assert.equal(out, local, 'the checksum of what the process read is that of what was written');
    c.child.kill('SIGINT');
    assert.equal(await c.exited, 0);
  });

  it('a dropped socket: the session lives on, and an attach replays every byte once, then tails', async () => {
    const proxy = await startProxy(s.server.url);
    const { c, adapter, h, row } = await sandboxOn('survivor', proxy.url);
    const frames: StreamFrame[] = [];
    // Prints a line, then one line per stdin line, so the test decides when output happens.
    const spawned = await adapter.processes.spawn(
      h.value,
      'sh',
      ['-c', 'echo line-0; i=1; while IFS= read -r _; do echo "line-$i"; i=$((i+1)); done'],
      { owner: (f) => frames.push(f), stdin: true, detachable: true },
    );
    assert.ok(spawned.ok);
    const text = (fs: StreamFrame[]) =>
      fs
        .filter((f) => f.type === 'stdout')
        .map((f) => Buffer.from((f as { data: Uint8Array }).data).toString())
        .join('');
    await until(() => text(frames).includes('line-0'), 'first line');
    assert.ok((await adapter.processes.writeStdin(spawned.value, Buffer.from('x\n'))).ok);
    await until(() => text(frames).includes('line-1'), 'second line');

    proxy.cut();
    await until(() => frames.find((f) => f.type === 'error'), 'the owner told the runner dropped');
    const dropped = frames.find((f) => f.type === 'error');
    assert.equal(dropped?.type === 'error' && dropped.error.detail, 'runner_disconnected');
    assert.ok(!frames.some((f) => f.type === 'exit'), 'no exit is invented for a drop');

    await until(() => s.server.host.whereis(row.id), 'the runner re-registered', 90_000);
    const sessions = await adapter.processes.listSessions(h.value);
    assert.ok(sessions.ok && sessions.value.length === 1);
    const again: StreamFrame[] = [];
    const attached = await adapter.processes.attach(h.value, sessions.value[0]!.id, {
      owner: (f) => again.push(f),
      stdin: true,
    });
    assert.ok(attached.ok);
    await until(() => text(again).includes('line-1\n'), 'the replay');
    assert.ok((await adapter.processes.writeStdin(attached.value, Buffer.from('y\n'))).ok);
    assert.ok((await adapter.processes.closeStdin(attached.value)).ok);
    await until(() => again.find((f) => f.type === 'exit'), 'exit after EOF');
    assert.equal(text(again), 'line-0\nline-1\nline-2\n', 'every byte once, in order: replay then live');
    assert.deepEqual(
      again.filter((f) => f.type === 'exit' || f.type === 'error').map((f) => f.type),
      ['exit'],
    );
    c.child.kill('SIGINT');
    assert.equal(await c.exited, 0);
    await proxy.close();
  });
});
