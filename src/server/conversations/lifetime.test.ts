/**
 * SANDBOX_MAX_LIFETIME_HOURS enforced by the engine's sweep, on a
 * real `fountain runner` child with the demo agent and a lifetime shrunk through the engine config.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { EngineDb } from '../store/engine-db.ts';
import type { ConversationEngine } from './engine.ts';
import { startEngineRig, type EngineRig } from './test-rig.ts';
import { allEvents, waitForStage } from './testing.ts';

describe('max lifetime', () => {
  let rig: EngineRig;
  let db: EngineDb;
  let engine: ConversationEngine;
  let accountId: string;
  const root = () => rig.root;

  before(async () => {
    // Idle parking off, so only the lifetime bound can act; the sweep is called by hand.
    rig = await startEngineRig('lifetime', { idleTimeoutMs: 0, maxLifetimeMs: 50, sweepIntervalMs: 3_600_000 });
    ({ db, engine, accountId } = rig);
  });

  after(async () => {
    await rig?.stop();
  });

  it('destroys a sandbox past its lifetime; the conversation stays idle and the next prompt starts a fresh one', async () => {
    const agent = await rig.demoAgent('demo');
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'remember: 7' });
    assert.ok(created.ok, JSON.stringify(created));
    const id = created.value.id;
    const first = created.value.sandbox!.name;
    await waitForStage(db, id, 'turn', 'done');
    const dir = join(root(), first);
    assert.ok(existsSync(dir));

    // Lifetime counts from creation: a sweep "now" (well past 50 ms) reclaims.
    const reclaimedCount = await engine.sweep(new Date(Date.now() + 1000));
    assert.equal(reclaimedCount, 1);
    const ev = await waitForStage(db, id, 'sandbox', 'done');
    const data = JSON.parse(ev.data) as { event: string; reason: string };
    assert.deepEqual([data.event, data.reason], ['reclaimed', 'max_lifetime']);
    assert.ok(!existsSync(dir), 'the runner destroyed the sandbox directory');
    const after = await engine.get(accountId, id);
    assert.ok(after.ok);
    assert.equal(after.value.status, 'idle');
    assert.equal(after.value.sandbox?.status, 'terminated');
    assert.equal(await engine.sweep(new Date(Date.now() + 1000)), 0, 'a reclaimed sandbox is not reclaimed twice');

    const mark = (await allEvents(db, id)).at(-1)!.id;
    const p = await engine.prompt(accountId, id, 'hello again');
    assert.ok(p.ok, JSON.stringify(p));
    await waitForStage(db, id, 'turn', 'done', mark);
    const reset = await waitForStage(db, id, 'session', 'done', mark);
    assert.equal((JSON.parse(reset.data) as { reason: string }).reason, 'fresh_sandbox');
    const fresh = await engine.get(accountId, id);
    assert.ok(fresh.ok && fresh.value.sandbox?.name !== first && fresh.value.sandbox?.status === 'ready');
  });
});
