/**
 * Checkpoints outlive the server process and not their conversation: with `fountain server` children on
 * the embedded database (blobs in the data directory) and on PostgreSQL (blobs in the database), a
 * checkpoint taken before a restart restores after it, and deleting a conversation removes its rows and
 * its blobs while another conversation's stay.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { openDatabase } from '../src/server/store/db.ts';
import { rowsOf, type EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL } from '../src/server/store/testing.ts';
import { answerOf, call, type Json, watchOver } from './helpers/http.ts';
import { type ServerChild, startServerChild } from './helpers/server-child.ts';

async function admin(query: string, url = TEST_POSTGRES_URL): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(query)).rows;
  } finally {
    await client.end();
  }
}

/** The digests of the blobs in a data directory's store (`blobs/<2 hex>/<64 hex>`; a temporary file is not one). */
function diskBlobs(dataDir: string): string[] {
  const root = join(dataDir, 'blobs');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((d) => /^[0-9a-f]{2}$/.test(d))
    .flatMap((d) => readdirSync(join(root, d)).filter((f) => /^[0-9a-f]{64}$/.test(f)))
    .map((hex) => `sha256:${hex}`)
    .sort();
}

for (const store of ['embedded', 'postgres'] as const) {
  describe(`checkpoints across a server restart (${store})`, { timeout: 600_000 }, () => {
    const tmp = realpathSync(mkdtempSync(join(tmpdir(), `fountain-ckpt-restart-${store}-`)));
    const dataDir = join(tmp, 'data');
    const key = `ftn_${randomBytes(32).toString('hex')}`;
    const dbName = `fountain_ckpt_${process.pid}_${randomBytes(4).toString('hex')}`;
    const dbUrl = (() => {
      const u = new URL(TEST_POSTGRES_URL);
      u.pathname = `/${dbName}`;
      return u.toString();
    })();
    const env: Record<string, string> = {
      FOUNTAIN_BOOTSTRAP_KEY: key,
      ...(store === 'postgres'
        ? { FOUNTAIN_DATABASE_URL: dbUrl, FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex') }
        : {}),
    };
    let server: ServerChild | undefined;
    const runners: RunnerChild[] = [];

    /** Checkpoint rows (conversation, digest) and stored blobs, read with no server running on the data. */
    const stored = async (): Promise<{ rows: Array<{ conversation_id: string; digest: string }>; blobs: string[] }> => {
      const database = await openDatabase(store === 'postgres' ? { url: dbUrl } : { dataDir });
      try {
        const db = database.db as unknown as EngineDb;
        const rows = rowsOf<{ conversation_id: string; digest: string }>(
          await db.execute(sql`SELECT conversation_id, digest FROM checkpoints`),
        );
        const blobs =
          store === 'postgres'
            ? rowsOf<{ digest: string }>(await db.execute(sql`SELECT digest FROM blobs ORDER BY digest`)).map(
                (r) => r.digest,
              )
            : diskBlobs(dataDir);
        return { rows, blobs };
      } finally {
        await database.close();
      }
    };

    after(async () => {
      for (const r of runners) await r.stop();
      await server?.stop();
      if (store === 'postgres') await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
      rmSync(tmp, { recursive: true, force: true });
    });

    it('a checkpoint taken before a restart restores after it; a deleted conversation takes its blobs with it', async () => {
      if (store === 'postgres') await admin(`CREATE DATABASE ${dbName}`);
      const api = (method: string, path: string, body?: unknown) => call(server!.url, key, method, path, body);
      const start = (name: string) => {
        const r = startRunnerChild({
          name,
          root: join(tmp, `root-${name}`),
          baseUrl: server!.url,
          apiKey: key,
          home: tmp,
        });
        runners.push(r);
        return r;
      };
      const { online, events, turnEnd: ended } = watchOver(api);
      const turnEnd = (id: string, turnId: string) => ended(id, turnId, 120_000);
      const converse = async (agentId: string, prompt: string): Promise<string> => {
        const c = await api('POST', '/api/conversations', { agent_id: agentId, prompt });
        assert.equal(c.status, 201, JSON.stringify(c.body));
        const turn = (await api('GET', `/api/conversations/${c.body.data.id}/turns`)).body.data[0];
        assert.equal((await turnEnd(c.body.data.id, turn.id)).state, 'done');
        return c.body.data.id;
      };

      server = await startServerChild(env, dataDir);
      const first = start('first');
      const runnerA = await online('first');
      const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
        .data;
      const kept = await converse(agent.id, 'remember: the launch code is 0451');
      const deleted = await converse(agent.id, 'remember: the password is swordfish');
      // Each turn's checkpoint is taken after its done; a server stopping waits for the ones being taken.
      const taken = async () =>
        store === 'embedded'
          ? diskBlobs(dataDir).length
          : Number((await admin('SELECT count(*)::int AS n FROM checkpoints', dbUrl))[0]!.n);
      await until(async () => (await taken()) >= 2, 'both checkpoints stored', 60_000);

      await server.stop();
      await first.stop();
      rmSync(join(tmp, 'root-first'), { recursive: true, force: true });
      const before = await stored();
      const digestsOf = (rows: typeof before.rows, conv: string) =>
        new Set(rows.filter((r) => r.conversation_id === conv).map((r) => r.digest));
      assert.equal(digestsOf(before.rows, kept).size, 1, JSON.stringify(before));
      assert.equal(digestsOf(before.rows, deleted).size, 1, JSON.stringify(before));
      assert.deepEqual(before.blobs, [...new Set(before.rows.map((r) => r.digest))].sort(), 'each row has its blob');

      // Another server process on the same data: the runner that held both sandboxes is gone for good.
      server = await startServerChild(env, dataDir);
      assert.equal((await api('DELETE', `/api/runners/${runnerA.id}`)).status, 204);
      start('second');
      await online('second');
      const p = await api('POST', `/api/conversations/${kept}/prompts`, { prompt: 'recall' });
      assert.equal(p.status, 200, JSON.stringify(p.body));
      await turnEnd(kept, p.body.turn_id);
      const all = await events(kept);
      const stages = JSON.stringify(all.filter((e) => e.stage).map((e) => [e.stage, e.state, e.data]));
      assert.ok(
        all.some((e) => e.stage === 'sandbox' && JSON.parse(e.data).event === 'restored'),
        `restored from the checkpoint taken before the restart: ${stages}`,
      );
      assert.match(answerOf(all, p.body.turn_id), /0451/, stages);

      assert.equal((await api('DELETE', `/api/conversations/${deleted}`)).status, 204);
      await server.stop();
      const now = await stored();
      assert.equal(digestsOf(now.rows, deleted).size, 0, 'the deleted conversation has no checkpoint rows');
      assert.ok(digestsOf(now.rows, kept).size >= 1, 'the other conversation keeps its checkpoints');
      for (const d of digestsOf(before.rows, deleted)) assert.ok(!now.blobs.includes(d), `its blob ${d} is removed`);
      assert.deepEqual(now.blobs, [...new Set(now.rows.map((r) => r.digest))].sort(), 'no blob is left unnamed');
    });
  });
}
