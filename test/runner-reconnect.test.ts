/**
 * The daemon's reconnect backoff seen from outside: a real `fountain runner` dials a real server
 * through a loopback proxy that the test cuts, or that drops every connection as soon as it is up.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCutProxy } from '../bench/lib/cut-proxy.ts';
import type { CutProxy } from '../bench/lib/cut-proxy.ts';
import { startServer } from '../src/server/start.ts';
import type { RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;

interface LogLine {
  msg?: string;
  attempt?: number;
  delayMs?: number;
  reason?: string;
}

function runner(args: string[], env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [BIN, 'runner', ...args], {
    env: { ...process.env, FOUNTAIN_PROFILE: '', FOUNTAIN_LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let partial = '';
  const take = (d: Buffer) => {
    partial += d.toString();
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const p of parts) {
      try {
        lines.push(JSON.parse(p) as LogLine);
      } catch {
        // not a log line (a usage message); the assertions name what was expected
      }
    }
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, lines, exited };
}

async function until<T>(check: () => T | Promise<T>, what: string, ms = 60_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const reconnects = (lines: LogLine[]) => lines.filter((l) => l.msg === 'runner: disconnected; reconnecting');

describe('runner reconnect backoff through a network that is cut', () => {
  let server: RunningServer;
  let schema: string;
  let scratch: string;
  let proxy: CutProxy;

  before(async () => {
    schema = uniqueSchemaName();
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-reconnect-')));
    server = await startServer({
      dataDir: join(scratch, 'server'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
    proxy = await startCutProxy(server.url);
  });
  after(async () => {
    await proxy.close();
    await server.stop();
    await dropSchema(schema);
    rmSync(scratch, { recursive: true, force: true });
  });

  const runnerId = async (name: string): Promise<string | undefined> => {
    const res = await fetch(`${server.url}/api/runners`, {
      headers: { authorization: `Bearer ${server.bootstrapKey}` },
    });
    const rows = ((await res.json()) as { data: Array<{ id: string; name: string; online: boolean }> }).data;
    return rows.find((r) => r.name === name && r.online)?.id;
  };

  it('each cut after the server took the runner back costs one base delay, not a doubling one', async () => {
    proxy.restore();
    const r = runner(['--name', 'cut', '--root', join(scratch, 'cut')], {
      FOUNTAIN_API_KEY: server.bootstrapKey!,
      FOUNTAIN_BASE_URL: proxy.url,
    });
    try {
      const id = await until(() => runnerId('cut'), 'the runner online');
      const connected = () => r.lines.filter((l) => l.msg === 'runner: connected').length;
      for (let i = 0; i < 4; i++) {
        await until(() => server.host.whereis(id), `the runner registered before cut ${i + 1}`);
        // The cut comes after the first exchange; one between the upgrade and that counts as a failing dial.
        await until(() => connected() === i + 1, `the runner's first exchange before cut ${i + 1}`);
        proxy.cut();
        await until(() => !server.host.whereis(id), `the server saw cut ${i + 1}`);
        await until(() => reconnects(r.lines).length === i + 1, `the runner saw cut ${i + 1}`);
        proxy.restore();
      }
      await until(() => server.host.whereis(id), 'the runner back after the last cut');
      const lines = reconnects(r.lines);
      // Before the fix only a 10-second ping reset the counter, so these were 1, 2, 3, 4 (1, 2, 4, 8 s).
      assert.deepEqual(
        lines.map((l) => l.attempt),
        [1, 1, 1, 1],
      );
      assert.deepEqual(
        lines.map((l) => l.delayMs),
        [1000, 1000, 1000, 1000],
      );
    } finally {
      r.child.kill('SIGINT');
      await r.exited;
    }
  });

  it('a server that accepts and drops at once is backed off from, doubling', async () => {
    proxy.mode('flap');
    const r = runner(['--name', 'flap', '--root', join(scratch, 'flap'), '--reconnect-base-ms', '50'], {
      FOUNTAIN_API_KEY: server.bootstrapKey!,
      FOUNTAIN_BASE_URL: proxy.url,
    });
    try {
      await until(() => reconnects(r.lines).length >= 5, 'five drops');
      const lines = reconnects(r.lines).slice(0, 5);
      assert.ok(
        proxy.upgradedThenDropped >= 5,
        'each connection was accepted (the upgrade went through), then dropped',
      );
      assert.ok(!r.lines.some((l) => l.msg === 'runner: connected'), 'and the runner never claimed to be connected');
      assert.deepEqual(
        lines.map((l) => l.attempt),
        [1, 2, 3, 4, 5],
      );
      assert.deepEqual(
        lines.map((l) => l.delayMs),
        [50, 100, 200, 400, 800],
      );
      // Once the network is sound again the runner comes back, and the counter starts over.
      proxy.restore();
      const id = await until(() => runnerId('flap'), 'the runner online once the proxy passes bytes');
      await until(() => server.host.whereis(id), 'registered');
      // The server registers the runner before the runner hears its first answer; a cut in between is one
      // more failing dial (the streak goes on), so the cut waits for the runner to say it is connected.
      await until(() => r.lines.some((l) => l.msg === 'runner: connected'), "the runner's first exchange");
      proxy.cut();
      const before = reconnects(r.lines).length;
      await until(() => reconnects(r.lines).length > before, 'the runner saw the cut');
      proxy.restore();
      assert.equal(reconnects(r.lines).at(-1)!.attempt, 1);
    } finally {
      proxy.restore();
      r.child.kill('SIGINT');
      await r.exited;
    }
  });
});
