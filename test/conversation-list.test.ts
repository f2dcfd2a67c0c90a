/**
 * The conversation list against a real server on PostgreSQL: the Conversations page's "Unread only" filter
 * (opening a conversation marks it read; new activity makes it unread again), and the API's paged
 * `GET /api/conversations` (limit, cursor, search, unread) in the same newest-activity order.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { findOwner } from '../src/server/account/store.ts';
import { insertAgent } from '../src/server/agents/store.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { conversations } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call } from './helpers/http.ts';

describe('the conversation list: unread filter and API paging', () => {
  let server: RunningServer;
  let schema: string;
  let home: string;
  let key: string;
  let cookie: string;
  let db: EngineDb;
  /** Newest activity first, as the list orders them. */
  let ids: string[] = [];

  const page = async (path: string): Promise<string> => {
    const res = await fetch(server.url + path, { headers: { cookie } });
    assert.equal(res.status, 200, path);
    return res.text();
  };
  const listed = (html: string): string[] =>
    [...html.matchAll(/class="conv-item[^"]*" data-conversation-id="([0-9a-f-]{36})"/g)].map((m) => m[1]!);

  before(async () => {
    schema = uniqueSchemaName();
    home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-list-')));
    server = await startServer({
      dataDir: join(home, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
    key = server.bootstrapKey!;
    db = server.database.db as unknown as EngineDb;
    const owner = (await findOwner(server.database.db))!;
    const agent = await insertAgent(db, owner.id, {
      name: 'lister',
      description: '',
      system: '',
      runtime: 'demo',
      model: 'fountain/demo',
      sandboxProvider: 'runner',
      permissionPolicy: {},
      metadata: {},
    });
    assert.ok(agent.ok);
    // Five idle conversations, one minute of activity apart; no sandbox is needed to be listed.
    const base = Date.parse('2026-01-01T00:00:00Z');
    const rows = await db
      .insert(conversations)
      .values(
        Array.from({ length: 5 }, (_, i) => ({
          accountId: owner.id,
          agentId: agent.agent.id,
          title: i === 2 ? 'Fix the Flaky test' : `chat ${i}`,
          firstPrompt: 'hello',
          status: 'idle' as const,
          runtime: 'demo' as const,
          turnCount: 1,
          lastActiveAt: new Date(base + i * 60_000),
        })),
      )
      .returning({ id: conversations.id });
    ids = rows.map((r) => r.id).reverse();
    const signin = await fetch(`${server.url}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
      body: new URLSearchParams({ api_key: key }),
    });
    cookie = (signin.headers.get('set-cookie') ?? '').split(';')[0]!;
  });
  after(async () => {
    await server?.stop();
    await dropSchema(schema);
    rmSync(home, { recursive: true, force: true });
  });

  it('"Unread only": never opened counts; opening marks read; new activity makes it unread again', async () => {
    assert.deepEqual(listed(await page('/conversations?unread=1')), ids);
    assert.match(await page('/conversations'), /id="f-unread" name="unread" type="checkbox" value="1"/);

    await page(`/conversations/${ids[1]}`);
    await page(`/conversations/${ids[3]}`);
    assert.deepEqual(listed(await page('/conversations?unread=1')), [ids[0], ids[2], ids[4]]);
    const all = await page('/conversations');
    assert.deepEqual(listed(all), ids, 'the unfiltered list still has every conversation');
    assert.match(all, /id="f-unread"[^>]*\/?>/);
    const checked = await page('/conversations?unread=1');
    assert.match(checked, /id="f-unread"[^>]*checked/);

    // The agent answered in an opened conversation: it is unread again, and first by activity.
    await db
      .update(conversations)
      .set({ lastActiveAt: sql`now() + interval '1 second'` })
      .where(eq(conversations.id, ids[3]!));
    assert.deepEqual(listed(await page('/conversations?unread=1')), [ids[3], ids[0], ids[2], ids[4]]);
    // Combined with the search, and kept by the pager's links.
    assert.deepEqual(listed(await page('/conversations?unread=1&q=flaky')), [ids[2]]);
  });

  it('the API pages by last activity with a cursor, searches, and filters unread', async () => {
    const first = await call(server.url, key, 'GET', '/api/conversations?limit=2');
    assert.equal(first.status, 200);
    const order = [ids[3], ids[0], ids[1], ids[2], ids[4]];
    assert.deepEqual(
      first.body.data.map((c: { id: string }) => c.id),
      order.slice(0, 2),
    );
    assert.equal(first.body.meta.has_more, true);
    const second = await call(
      server.url,
      key,
      'GET',
      `/api/conversations?limit=2&after=${encodeURIComponent(first.body.meta.next_cursor)}`,
    );
    assert.deepEqual(
      second.body.data.map((c: { id: string }) => c.id),
      order.slice(2, 4),
    );
    const third = await call(
      server.url,
      key,
      'GET',
      `/api/conversations?limit=2&after=${encodeURIComponent(second.body.meta.next_cursor)}`,
    );
    assert.deepEqual(
      third.body.data.map((c: { id: string }) => c.id),
      order.slice(4),
    );
    assert.deepEqual([third.body.meta.has_more, third.body.meta.next_cursor], [false, null]);

    const found = await call(server.url, key, 'GET', '/api/conversations?q=FLAKY');
    assert.deepEqual(
      found.body.data.map((c: { id: string; title: string }) => c.title),
      ['Fix the Flaky test'],
    );
    const unread = await call(server.url, key, 'GET', '/api/conversations?unread=true');
    assert.deepEqual(
      unread.body.data.map((c: { id: string }) => c.id),
      [ids[3], ids[0], ids[2], ids[4]],
    );
    assert.ok(unread.body.data.every((c: { unread: boolean }) => c.unread));

    // Without paging parameters: every conversation, no meta (as upstream).
    const plain = await call(server.url, key, 'GET', '/api/conversations');
    assert.equal(plain.body.data.length, 5);
    assert.equal(plain.body.meta, undefined);

    const bad = await call(server.url, key, 'GET', '/api/conversations?limit=2&after=nonsense');
    assert.deepEqual([bad.status, bad.body.error], [400, 'invalid_cursor']);
  });
});
