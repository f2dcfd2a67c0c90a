/**
 * Two server processes on one real PostgreSQL database (node A in this process, node B a
 * `fountain server` child): every due schedule fires exactly once, and team-stream events that
 * originate on A (roster, schedules, turns, runner presence) reach an SSE client of B over LISTEN/NOTIFY.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import pg from 'pg';
import { FOUNTAIN_BIN, startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL } from '../src/server/store/testing.ts';
import { scheduleRuns, schedules } from '../src/server/store/team-schema.ts';
import { turns } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { call, openStream, stageIs, type Json, type Stream } from './helpers/http.ts';

const ROUNDS = 3;

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_POSTGRES_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Starts `fountain server` and resolves with its URL once it prints the listening line. */
function startServerChild(
  env: Record<string, string>,
  dataDir: string,
): Promise<{ child: ChildProcess; url: string; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    [FOUNTAIN_BIN, 'server', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'],
    {
      env: { ...process.env, ...env, FOUNTAIN_LOG_FORMAT: 'json' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(t);
  };
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /fountain server listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1]!, stop });
    });
    child.once('exit', (code) => reject(new Error(`fountain server exited with ${code}: ${err}`)));
  });
}

describe('two server processes sharing PostgreSQL', () => {
  let tmp: string;
  let dbName: string;
  let a: RunningServer;
  let b: Awaited<ReturnType<typeof startServerChild>>;
  let runner: RunnerChild;
  let streamB: Stream;
  const key = `ftn_${randomBytes(32).toString('hex')}`;
  const onA = (method: string, path: string, body?: unknown) => call(a.url, key, method, path, body);
  const db = () => a.database.db as unknown as EngineDb;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-')));
    dbName = `fountain_team_${process.pid}_${randomBytes(4).toString('hex')}`;
    await admin(`CREATE DATABASE ${dbName}`);
    const url = new URL(TEST_POSTGRES_URL);
    url.pathname = `/${dbName}`;
    const env = { FOUNTAIN_DATABASE_URL: url.toString(), FOUNTAIN_BOOTSTRAP_KEY: key };
    a = await startServer({
      dataDir: join(tmp, 'a'),
      port: 0,
      env,
      engine: { idleTimeoutMs: 0 },
      sseHeartbeatMs: 500,
      scheduler: { tickMs: 50, snoozeMs: 100, patienceMs: 120_000 },
    });
    b = await startServerChild(
      {
        ...env,
        FOUNTAIN_SCHEDULE_TICK_MS: '50',
        FOUNTAIN_SCHEDULE_SNOOZE_MS: '100',
        FOUNTAIN_SCHEDULE_PATIENCE_MS: '120000',
      },
      join(tmp, 'b'),
    );
    runner = startRunnerChild({ name: 'c', root: join(tmp, 'sandboxes'), baseUrl: a.url, apiKey: key, home: tmp });
    await until(
      async () => ((await onA('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner on node A',
      60_000,
    );
    streamB = openStream(`${b.url}/api/team/stream`, key);
    await until(() => streamB.raw().startsWith(': connected'), 'node B’s team stream');
  });

  after(async () => {
    streamB?.close();
    await runner?.stop();
    await b?.stop();
    await a?.stop();
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  });

  it('fires every due time exactly once and tells node B’s stream what happened on node A', async () => {
    const agents: string[] = [];
    for (const name of ['one', 'two']) {
      const r = await onA('POST', '/api/agents', { name, runtime: 'demo', model: 'fountain/demo' });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      agents.push(r.body.data.id);
      const mark = streamB.events.length;
      assert.equal((await onA('POST', '/api/team', { agent_id: r.body.data.id })).status, 201);
      await streamB.wait((e) => e.event === 'team', 'node B hears the roster change on node A', mark);
    }
    for (const id of agents) {
      await until(
        async () => (await onA('GET', `/api/team/${id}`)).body.data.presence.state === 'online',
        'teammate online',
        60_000,
      );
    }
    // Events of turns that ran on node A reach node B's stream with their agent.
    const first = await streamB.wait(stageIs('provision', 'done', agents[0]), 'node B sees node A’s provision/done');
    assert.equal(typeof first.data.conversation_id, 'string');

    const mark = streamB.events.length;
    const made = [];
    for (const id of agents) {
      const r = await onA('POST', `/api/team/${id}/schedules`, { cron: '0 0 1 1 *', prompt: `scheduled for ${id}` });
      assert.equal(r.status, 201);
      made.push(r.body.data);
    }
    await streamB.wait((e) => e.event === 'schedule', 'node B hears the schedule change', mark);

    for (let round = 1; round <= ROUNDS; round++) {
      // The due time arrives for both schedules at once; both nodes' schedulers race for it. The cron
      // (yearly) never comes due by itself during the test, so every firing is one the test made.
      const due = new Date(Date.now() - 1000);
      for (const s of made) await db().update(schedules).set({ nextRunAt: due }).where(eq(schedules.id, s.id));
      for (const s of made) {
        await until(
          async () => {
            const rows = await db()
              .select()
              .from(scheduleRuns)
              .where(and(eq(scheduleRuns.scheduleId, s.id), eq(scheduleRuns.firedAt, due)));
            return rows[0]?.status === 'delivered';
          },
          `round ${round} delivered`,
          60_000,
        );
      }
    }

    for (const [i, s] of made.entries()) {
      const runs = await db().select().from(scheduleRuns).where(eq(scheduleRuns.scheduleId, s.id));
      assert.equal(runs.length, ROUNDS);
      assert.ok(runs.every((r) => r.status === 'delivered'));
      const conv = (await onA('GET', `/api/team/${agents[i]}`)).body.data.conversation.id;
      await until(
        async () => {
          const rows = await db().select().from(turns).where(eq(turns.conversationId, conv));
          return rows.filter((t) => t.prompt === s.prompt && t.status === 'completed').length === ROUNDS;
        },
        'every scheduled turn to complete',
        60_000,
      );
      const rows = await db().select().from(turns).where(eq(turns.conversationId, conv));
      assert.equal(rows.filter((t) => t.prompt === s.prompt).length, ROUNDS, 'each due time delivered exactly once');
    }

    const drop = streamB.events.length;
    await runner.stop();
    await streamB.wait((e) => e.event === 'team', 'node B hears the runner drop on node A', drop);
  });
});
