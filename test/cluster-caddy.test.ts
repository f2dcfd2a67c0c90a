/**
 * The cluster of docs/deployment.md started for real: Debian's Caddy with deploy/Caddyfile in front of
 * two `fountain server` processes on PostgreSQL. A client that talks only to Caddy holds a demo
 * conversation, its SSE stream included, while the node driving its turn is killed and restarted.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { slowAnswer } from '../src/acp/demo/agent.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { turns } from '../src/server/store/conversation-schema.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { answerOf, call, type Json } from './helpers/http.ts';
import { spawnClusterNode, stopClusterNodes, type NodeProcess } from './fixtures/cluster-node-process.ts';

const CADDYFILE = new URL('../deploy/Caddyfile', import.meta.url).pathname;
const KEY = `ftn_${randomBytes(32).toString('hex')}`;
const CHUNKS = 60;

const haveCaddy = spawnSync('caddy', ['version'], { stdio: 'ignore' }).status === 0;
/** Skips without Caddy, except in CI, where the test must run and its absence fails it. */
const skip = haveCaddy || process.env.CI === 'true' ? false : 'caddy not found (apt-get install caddy)';

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

interface SseEvent {
  readonly id: number;
  readonly data: Json;
}

/**
 * What a browser's EventSource does: reads the stream, and when it ends or breaks, dials again
 * with Last-Event-ID, through whichever node the balancer picks.
 */
function reconnectingStream(url: string, key: string) {
  const events: SseEvent[] = [];
  let last = 0;
  let connects = 0;
  let stopped = false;
  let ctl = new AbortController();
  const done = (async () => {
    while (!stopped) {
      ctl = new AbortController();
      try {
        const res = await fetch(url, {
          headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', 'last-event-id': String(last) },
          signal: ctl.signal,
        });
        if (res.status === 200 && res.body) {
          connects++;
          const reader = res.body.getReader();
          const dec = new TextDecoder();
          let buf = '';
          for (;;) {
            const { value, done: end } = await reader.read();
            if (end) break;
            buf += dec.decode(value, { stream: true });
            let i: number;
            while ((i = buf.indexOf('\n\n')) >= 0) {
              const block = buf.slice(0, i);
              buf = buf.slice(i + 2);
              let id: number | null = null;
              let data: Json = null;
              for (const line of block.split('\n')) {
                if (line.startsWith('id:')) id = Number(line.slice(3).trim());
                else if (line.startsWith('data:')) data = JSON.parse(line.slice(5).trim());
              }
              if (id !== null) {
                events.push({ id, data });
                last = id;
              }
            }
          }
        } else await res.body?.cancel();
      } catch {
        // The node behind this stream died (or the test stopped it): dial again, as EventSource does.
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    events,
    connects: () => connects,
    stop: async () => {
      stopped = true;
      ctl.abort();
      await done;
    },
  };
}

describe('Caddy in front of two server nodes on PostgreSQL (deploy/Caddyfile)', { skip, timeout: 600_000 }, () => {
  const schema = uniqueSchemaName();
  let tmp: string;
  let observer: Database;
  let caddy: ChildProcess | undefined;
  let caddyLog = '';
  let lb: string;
  const ports: Record<'A' | 'B', number> = { A: 0, B: 0 };
  const nodes: Partial<Record<'A' | 'B', NodeProcess>> = {};
  let runner: RunnerChild | undefined;
  let openStream: ReturnType<typeof reconnectingStream> | undefined;
  let env: Record<string, string>;

  const startNode = async (name: 'A' | 'B') => {
    nodes[name] = await spawnClusterNode(name, schema, { ...env, CLUSTER_NODE_PORT: String(ports[name]) });
    return nodes[name]!;
  };

  before(async () => {
    if (!haveCaddy) throw new Error('caddy is required when CI=true (apt-get install caddy)');
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-caddy-')));
    ports.A = await freePort();
    ports.B = await freePort();
    const lbPort = await freePort();
    lb = `http://127.0.0.1:${lbPort}`;
    env = {
      FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
      FOUNTAIN_BOOTSTRAP_KEY: KEY,
      // What docs/deployment.md asks of a cluster: one secret key and one session secret for all nodes,
      // and the balancer's address as the public URL.
      FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex'),
      FOUNTAIN_SESSION_SECRET: randomBytes(32).toString('hex'),
      PUBLIC_URL: lb,
      FOUNTAIN_RUNNER_HEARTBEAT_MS: '500',
      FOUNTAIN_NODE_HEARTBEAT_MS: '200',
      FOUNTAIN_NODE_EXPIRY_MS: '3000',
    };
    // Each node is its own process loading the server through tsx: started together, not one after the other.
    await Promise.all([startNode('A'), startNode('B')]);
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    caddy = spawn('caddy', ['run', '--config', CADDYFILE, '--adapter', 'caddyfile'], {
      env: {
        ...process.env,
        HOME: tmp,
        XDG_DATA_HOME: join(tmp, 'caddy-data'),
        XDG_CONFIG_HOME: join(tmp, 'caddy-config'),
        FOUNTAIN_LB_PORT: String(lbPort),
        FOUNTAIN_LB_BIND: '127.0.0.1',
        FOUNTAIN_NODES: `127.0.0.1:${ports.A} 127.0.0.1:${ports.B}`,
        FOUNTAIN_LB_HEALTH_INTERVAL: '1s',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    caddy.stdout!.on('data', (d: Buffer) => (caddyLog += d.toString()));
    caddy.stderr!.on('data', (d: Buffer) => (caddyLog += d.toString()));
    await until(
      async () => {
        if (caddy!.exitCode !== null) throw new Error(`caddy exited ${caddy!.exitCode}: ${caddyLog.slice(-2000)}`);
        return (await fetch(`${lb}/health/ready`).catch(() => null))?.status === 200;
      },
      'caddy answering for the nodes',
      30_000,
    );
  });

  after(async () => {
    // A failed test leaves the stream dialing: stopped here, or its loop keeps the file from ever exiting.
    await openStream?.stop();
    await runner?.stop();
    // The nodes first: Caddy's graceful stop waits for every request it proxies, and the SSE request the
    // test aborted lingers there (CLOSE-WAIT) until its node ends it, which made Caddy's stop take ~60 s.
    await stopClusterNodes(nodes.A, nodes.B);
    if (caddy && caddy.exitCode === null) {
      caddy.kill('SIGTERM');
      await new Promise((r) => caddy!.once('exit', r));
    }
    await observer?.close();
    await dropSchema(schema);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('a conversation through Caddy goes on while the node driving its turn is killed and restarted', async () => {
    const db = () => observer.db as unknown as EngineDb;
    // The runner, too, knows only the balancer.
    runner = startRunnerChild({ name: 'r', root: join(tmp, 'sandboxes'), baseUrl: lb, apiKey: KEY, home: tmp });
    await until(
      async () =>
        ((await call(lb, KEY, 'GET', '/api/runners')).body?.data as Json[] | undefined)?.some((r) => r.online),
      'the runner online, through Caddy',
      60_000,
    );
    const agent = await call(lb, KEY, 'POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const created = await call(lb, KEY, 'POST', '/api/conversations', {
      agent_id: agent.body.data.id,
      prompt: 'remember: before the kill',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data.id as string;
    const stream = reconnectingStream(`${lb}/api/conversations/${conv}/stream`, KEY);
    openStream = stream;

    const turnsOf = async (): Promise<Json[]> =>
      (await call(lb, KEY, 'GET', `/api/conversations/${conv}/turns`)).body.data;
    const ended = (turnId: string) =>
      until(
        async () => {
          const t = (await turnsOf()).find((x) => x.id === turnId);
          return t && ['completed', 'failed', 'interrupted'].includes(t.status) ? t : undefined;
        },
        `turn ${turnId} to end`,
        180_000,
      );
    const prompt = async (text: string): Promise<string> => {
      // A prompt may meet the runner between nodes (503 runner_offline, with Retry-After): sent again.
      for (;;) {
        const p = await call(lb, KEY, 'POST', `/api/conversations/${conv}/prompts`, { prompt: text });
        if (p.status === 200) return p.body.turn_id as string;
        assert.ok([503, 409].includes(p.status), JSON.stringify(p.body));
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    const first = (await turnsOf())[0]!;
    assert.equal((await ended(first.id)).status, 'completed');

    // A long turn; once some of it is out, the node driving it dies without a word.
    const turnId = await prompt(`slow: ${CHUNKS} 100ms`);
    await until(
      () =>
        answerOf(
          stream.events.map((e) => e.data),
          turnId,
        ).includes('chunk 5 '),
      'chunk 5 over SSE',
    );
    const driver = (await db().select().from(turns).where(eq(turns.id, turnId)))[0]!.nodeId;
    const victim = driver === nodes.A!.id ? 'A' : 'B';
    assert.ok(driver === nodes[victim]!.id, 'one of the two nodes drives the turn');
    nodes[victim]!.child.kill('SIGKILL');
    await nodes[victim]!.exited;

    // The other node adopts the turn and the runner's session: the turn completes, whole.
    const t = await ended(turnId);
    assert.equal(t.status, 'completed', JSON.stringify(t));

    // The killed node comes back where Caddy looks for it, and the conversation goes on.
    await startNode(victim);
    await until(
      async () => (await fetch(`http://127.0.0.1:${ports[victim]}/health/ready`).catch(() => null))?.status === 200,
      'the restarted node ready',
    );
    const next = await prompt('recall');
    assert.equal((await ended(next)).status, 'completed');

    // Every event, through Caddy's API, reached the SSE client once, in order, across the kill.
    const stored: Json[] = [];
    for (let after = 0; ; ) {
      const page = await call(lb, KEY, 'GET', `/api/conversations/${conv}/events?after=${after}&limit=1000`);
      stored.push(...page.body.data);
      if (!page.body.meta.has_more) break;
      after = page.body.meta.next_cursor;
    }
    const lastId = stored.at(-1).id as number;
    await until(() => stream.events.some((e) => e.id === lastId), 'the SSE client caught up');
    await stream.stop();
    assert.deepEqual(
      stream.events.map((e) => e.id),
      stored.map((e) => e.id),
      'SSE ids = stored ids',
    );
    assert.equal(answerOf(stored, turnId), slowAnswer(CHUNKS).join(''), 'the killed turn’s answer, whole and once');
    assert.equal(
      stored.filter((e) => e.turn_id === turnId && e.stage === 'turn' && e.state === 'done').length,
      1,
      'one end',
    );
    assert.match(answerOf(stored, next), /before the kill/);
    assert.ok(stream.connects() >= 1);
  });
});
