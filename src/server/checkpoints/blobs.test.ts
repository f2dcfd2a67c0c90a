import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { Private } from '../../sandbox/private.ts';
import { createAccount } from '../account/store.ts';
import { insertConversation } from '../conversations/store.ts';
import { openTestDatabase, type TestDatabase, type TestDriver } from '../store/testing.ts';
import { type BlobStore, digestOf } from './blobs.ts';
import { CHUNK_BYTES, DbBlobStore } from './blobs-db.ts';
import { DiskBlobStore } from './blobs-disk.ts';
import { collectBlobs } from './collect.ts';

const KEY = new Private(randomBytes(32));
const OTHER_KEY = new Private(randomBytes(32));

interface Rig {
  store: BlobStore;
  /** The same blobs read with another server's key. */
  foreign: BlobStore;
  /** Flips one byte of a stored blob's sealed form. */
  tamper(digest: string): Promise<void>;
  /** Cuts a stored blob's sealed form short. */
  truncate(digest: string): Promise<void>;
  dispose(): Promise<void>;
}

async function diskRig(): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), 'fountain-blobs-'));
  const path = (digest: string) => {
    const hex = digest.slice(7);
    return join(dir, hex.slice(0, 2), hex);
  };
  return {
    store: new DiskBlobStore(dir, KEY),
    foreign: new DiskBlobStore(dir, OTHER_KEY),
    tamper: async (d) => {
      const b = readFileSync(path(d));
      b.writeUInt8(b.readUInt8(b.length - 1) ^ 0xff, b.length - 1);
      writeFileSync(path(d), b);
    },
    truncate: async (d) => writeFileSync(path(d), readFileSync(path(d)).subarray(0, 20)),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function dbRig(t: TestDatabase): Promise<Rig> {
  const db = t.database.db;
  return {
    store: new DbBlobStore(db, KEY),
    foreign: new DbBlobStore(db, OTHER_KEY),
    tamper: async (d) => {
      await db.execute(
        sql`UPDATE blob_chunks SET data = overlay(data placing '\\xff'::bytea from 30 for 1) WHERE digest = ${d} AND seq = 0`,
      );
    },
    truncate: async (d) => {
      await db.execute(sql`DELETE FROM blob_chunks WHERE digest = ${d} AND seq > 0`);
      await db.execute(sql`UPDATE blob_chunks SET data = substring(data from 1 for 20) WHERE digest = ${d}`);
    },
    dispose: async () => {},
  };
}

const cases: Array<{ name: string; driver?: TestDriver }> = [
  { name: 'disk' },
  { name: 'pglite', driver: 'pglite' },
  { name: 'postgres', driver: 'postgres' },
];

for (const c of cases) {
  describe(`checkpoint blobs in ${c.name === 'disk' ? 'the data directory' : `the database (${c.name})`}`, () => {
    let t: TestDatabase | undefined;
    let rig: Rig;
    before(async () => {
      if (c.driver) t = await openTestDatabase(c.driver);
      rig = c.driver ? await dbRig(t!) : await diskRig();
    });
    after(async () => {
      await rig?.dispose();
      await t?.dispose();
    });

    it('stores, deduplicates by digest and reads back exactly what was put (a blob larger than one chunk too)', async () => {
      const big = randomBytes(CHUNK_BYTES * 2 + 12345);
      const a = await rig.store.put(big);
      assert.ok(a.ok);
      assert.deepEqual(a.value, { digest: digestOf(big), size: big.length });
      const again = await rig.store.put(Buffer.from(big));
      assert.ok(again.ok);
      assert.equal(again.value.digest, a.value.digest);
      assert.equal((await rig.store.list()).filter((b) => b.digest === a.value.digest).length, 1, 'stored once');
      const back = await rig.store.get(a.value.digest);
      assert.ok(back.ok);
      assert.ok(back.value.equals(big));
      const empty = await rig.store.put(Buffer.alloc(0));
      assert.ok(empty.ok);
      const emptyBack = await rig.store.get(empty.value.digest);
      assert.ok(emptyBack.ok && emptyBack.value.length === 0);
    });

    it('keeps the plaintext out of what it stores', async () => {
      const secret = Buffer.from(`checkpoint of a conversation: ${randomBytes(8).toString('hex')}`.repeat(10));
      const r = await rig.store.put(secret);
      assert.ok(r.ok);
      const stored =
        c.driver && t
          ? Buffer.concat(
              (
                (await t.database.db.execute(
                  sql`SELECT data FROM blob_chunks WHERE digest = ${r.value.digest}`,
                )) as unknown as {
                  rows: Array<{ data: Uint8Array }>;
                }
              ).rows.map((x) => Buffer.from(x.data)),
            )
          : null;
      if (stored) assert.ok(!stored.includes(secret.subarray(0, 30)));
    });

    it('refuses an altered, a truncated and a foreign blob, a missing one and a digest that is not one', async () => {
      const data = randomBytes(5000);
      const r = await rig.store.put(data);
      assert.ok(r.ok);
      const foreign = await rig.foreign.get(r.value.digest);
      assert.ok(!foreign.ok);
      assert.equal(foreign.error.code, 'corrupt');
      assert.match(foreign.error.message, /another server's key/);

      await rig.tamper(r.value.digest);
      const tampered = await rig.store.get(r.value.digest);
      assert.ok(!tampered.ok);
      assert.equal(tampered.error.code, 'corrupt');

      const other = await rig.store.put(randomBytes(CHUNK_BYTES + 10));
      assert.ok(other.ok);
      await rig.truncate(other.value.digest);
      const truncated = await rig.store.get(other.value.digest);
      assert.ok(!truncated.ok);
      assert.equal(truncated.error.code, 'corrupt');

      const missing = await rig.store.get(digestOf(Buffer.from('never stored')));
      assert.ok(!missing.ok);
      assert.equal(missing.error.code, 'not_found');
      for (const bad of ['../../etc/passwd', 'sha256:../../x', `sha256:${'A'.repeat(64)}`, '']) {
        const g = await rig.store.get(bad);
        assert.ok(!g.ok);
        assert.equal(g.error.code, 'invalid');
        assert.equal(await rig.store.has(bad), false);
      }
    });

    it('collects blobs no checkpoint names once past the grace period, and deletes idempotently', async () => {
      const keep = await rig.store.put(Buffer.from('kept: a checkpoint names it'));
      const drop = await rig.store.put(Buffer.from('dropped: nothing names it'));
      assert.ok(keep.ok && drop.ok);
      const young = await collectBlobs(rig.store, new Set([keep.value.digest]), { graceMs: 60_000 });
      assert.deepEqual(young.removed, [], 'nothing younger than the grace period is taken');
      const all = new Set((await rig.store.list()).map((b) => b.digest));
      all.delete(drop.value.digest);
      const later = await collectBlobs(rig.store, all, { graceMs: 60_000, now: new Date(Date.now() + 120_000) });
      assert.deepEqual(later.removed, [drop.value.digest]);
      assert.deepEqual(later.errors, []);
      assert.equal(await rig.store.has(drop.value.digest), false);
      assert.equal(await rig.store.has(keep.value.digest), true);
      const twice = await rig.store.delete(drop.value.digest);
      assert.ok(twice.ok);
    });

    if (c.driver) {
      it('a conversation takes its checkpoint rows with it when it is deleted', async () => {
        const db = t!.database.db;
        const acct = await createAccount(db, { name: 'cp', email: `cp-${c.name}@example.test`, role: 'owner' });
        const { conversation } = await insertConversation(
          db,
          {
            accountId: acct.id,
            agentId: null,
            title: null,
            firstPrompt: null,
            status: 'idle',
            runtime: 'demo',
            permissionPolicy: {},
            source: 'api',
            turnCount: 0,
          },
          { provider: 'runner', name: `runner-${'0'.repeat(32)}-cafe0001`, status: 'ready' },
        );
        const blob = await rig.store.put(Buffer.from('session files'));
        assert.ok(blob.ok);
        await db.execute(
          sql`INSERT INTO checkpoints (account_id, conversation_id, digest, size, holds) VALUES (${acct.id}, ${conversation.id}, ${blob.value.digest}, ${blob.value.size}, ${JSON.stringify({ session: true })}::jsonb)`,
        );
        await db.execute(sql`DELETE FROM conversations WHERE id = ${conversation.id}`);
        const left = (await db.execute(sql`SELECT count(*)::int AS n FROM checkpoints`)) as unknown as {
          rows: Array<{ n: number }>;
        };
        assert.equal(left.rows[0]!.n, 0);
      });
    }
  });
}

describe('the data directory store leaves nothing half-written', () => {
  it('lists only whole blobs (a temporary file beside one is not a blob)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-blobs-'));
    try {
      const store = new DiskBlobStore(dir, KEY);
      const r = await store.put(Buffer.from('whole'));
      assert.ok(r.ok);
      const shard = readdirSync(dir)[0]!;
      writeFileSync(join(dir, shard, `${r.value.digest.slice(7)}.tmp-1-abcd`), 'partial');
      assert.deepEqual(
        (await store.list()).map((b) => b.digest),
        [r.value.digest],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
