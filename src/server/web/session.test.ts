import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAccount } from '../account/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { createApiKey, revokeApiKey } from '../core/keys-store.ts';
import { openTestDatabase, type TestDatabase } from '../store/testing.ts';
import { insertSigninToken } from '../account/signin-store.ts';
import {
  checkKeyForSignIn,
  consumeSigninToken,
  mintSignInLink,
  openSession,
  refusedLinkMessage,
  resolveSession,
  sealSession,
} from './session.ts';

const SECRET = 's'.repeat(40);
const A = '00000000-0000-4000-8000-00000000000a';
const K = '00000000-0000-4000-8000-00000000000b';

describe('session cookie', () => {
  it('opens what it sealed, and nothing tampered, foreign or expired', () => {
    const now = 1_000_000;
    const v = sealSession(SECRET, { a: A, k: K, e: now + 60 });
    assert.deepEqual(openSession(SECRET, v, now), { a: A, k: K, e: now + 60 });
    assert.equal(openSession('t'.repeat(40), v, now), null, 'another secret');
    assert.equal(openSession(SECRET, v, now + 61), null, 'expired');
    const [body, sig] = v.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ a: A, k: K, e: now + 9e6 })).toString('base64url');
    assert.equal(openSession(SECRET, `${forged}.${sig}`, now), null, 'body swapped');
    assert.equal(openSession(SECRET, `${body}.${sig.slice(0, -2)}`, now), null, 'signature cut');
    for (const junk of ['', '.', 'abc', `${body}.`, `.${sig}`])
      assert.equal(openSession(SECRET, junk, now), null, junk);
  });
});

describe('sign-in with keys and one-time links (PGlite)', () => {
  let tdb: TestDatabase;
  let db: EngineDb;
  let accountId: string;

  before(async () => {
    tdb = await openTestDatabase('pglite');
    db = tdb.database.db as unknown as EngineDb;
    accountId = (await createAccount(tdb.database.db, { name: 'owner', role: 'owner' })).id;
  });
  after(async () => tdb?.dispose());

  it('accepts a full key, refuses malformed, unknown, revoked and sandbox keys in words', async () => {
    const full = await createApiKey(tdb.database.db, { accountId, name: 'full', scopes: ['full'] });
    const sandbox = await createApiKey(tdb.database.db, { accountId, name: 'sb', scopes: ['sandbox'] });
    const ok = await checkKeyForSignIn(db, `  ${full.key}\n`);
    assert.ok(ok.ok && ok.account.id === accountId);
    assert.match(((await checkKeyForSignIn(db, 'nope')) as { message: string }).message, /64 lowercase hex/);
    assert.match(((await checkKeyForSignIn(db, `ftn_${'1'.repeat(64)}`)) as { message: string }).message, /not known/);
    assert.match(((await checkKeyForSignIn(db, sandbox.key)) as { message: string }).message, /full-scope/);
    const session = sealSession(SECRET, { a: accountId, k: full.row.id, e: Math.floor(Date.now() / 1000) + 60 });
    assert.equal((await resolveSession(db, SECRET, session))?.account.id, accountId);
    await revokeApiKey(tdb.database.db, accountId, full.row.id);
    assert.match(((await checkKeyForSignIn(db, full.key)) as { message: string }).message, /revoked/);
    assert.equal(await resolveSession(db, SECRET, session), null, 'revoking the key ends the session');
  });

  it('spends a sign-in link exactly once, even when two requests race', async () => {
    const link = await mintSignInLink(db, accountId, 'http://127.0.0.1:4000/');
    const m = /^http:\/\/127\.0\.0\.1:4000\/signin\/link\?token=(fst_[0-9a-f]{48})$/.exec(link);
    assert.ok(m, link);
    const results = await Promise.all([consumeSigninToken(db, m[1]!), consumeSigninToken(db, m[1]!)]);
    assert.deepEqual(results.filter(Boolean), [accountId]);
    assert.equal(await consumeSigninToken(db, m[1]!), undefined);
    assert.equal(await consumeSigninToken(db, 'fst_zz'), undefined);
  });

  it('says why a link was refused and what to do instead: used, expired, or never made here', async () => {
    const used = await insertSigninToken(db, accountId, 60_000);
    assert.equal(await consumeSigninToken(db, used), accountId);
    const expired = await insertSigninToken(db, accountId, 1000, new Date(Date.now() - 60_000));
    assert.equal(await consumeSigninToken(db, expired), undefined);
    const messages = {
      used: await refusedLinkMessage(db, used),
      expired: await refusedLinkMessage(db, expired),
      unknown: await refusedLinkMessage(db, `fst_${'0'.repeat(48)}`),
      malformed: await refusedLinkMessage(db, 'fst_zz'),
    };
    assert.match(messages.used, /already been used/);
    assert.match(messages.expired, /expired; a link works for 15 minutes/);
    assert.match(messages.unknown, /not one this server made/);
    assert.match(messages.malformed, /not one this server made/);
    for (const m of Object.values(messages))
      assert.match(m, /owner API key .* or restart `fountain up` for a new link/);
  });
});
