/**
 * The fake adapter against the conformance suite, plus the fake-only tests of its script vocabulary.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { runConformanceSuite, FrameCollector } from '../../sandbox/conformance/index.ts';
import { capabilitiesOf, type SandboxAdapter } from '../../sandbox/adapter.ts';
import { Private } from '../../sandbox/private.ts';
import { isTransient } from '../../sandbox/retry.ts';
import type { Handle } from '../../sandbox/types.ts';
import { FakeAdapter, FAKE_FIXTURES, file, policy, reset } from './index.ts';

const T = 5000;
const adapter = new FakeAdapter();
const text = (b: Uint8Array) => new TextDecoder().decode(b);
let n = 0;
const fresh = async (): Promise<Handle> => {
  const r = await adapter.lifecycle.create(`fake-only-${++n}`);
  assert.ok(r.ok);
  return r.value;
};

runConformanceSuite('fake adapter conformance', {
  adapter: () => adapter,
  fixtures: FAKE_FIXTURES,
  after: async () => reset(),
  readFile: async (h, path) => file(h.name, path)?.data ?? null,
  brokenTransport: async () => ({
    adapter: new FakeAdapter({ unreachable: true }),
    handle: adapter.buildHandle('conformance-unreachable'),
  }),
  secret: async () => {
    const value = `fake-secret-${randomBytes(12).toString('hex')}`;
    const name = `conformance-secret-${randomBytes(4).toString('hex')}`;
    const created = await adapter.lifecycle.create(name);
    assert.ok(created.ok);
    return { handle: adapter.buildHandle(name, new Private(value)), value };
  },
});

describe('fake adapter only', () => {
  after(() => reset());

  it('its parts give the "Fake newest" capability set, without public_url and checkpoint', () => {
    assert.equal((adapter as SandboxAdapter).checkpoints, undefined);
    assert.deepEqual([...capabilitiesOf(adapter)].sort(), [
      'attach',
      'create_new',
      'force_terminate_session',
      'network_policy',
      'suspend',
      'terminate_session',
    ]);
  });

  it('create_new refuses a legacy name without touching its files; already_exists is permanent', async () => {
    const h = await fresh();
    assert.ok((await adapter.files.writeFile(h, '/home/sprite/a.txt', new TextEncoder().encode('legacy'))).ok);
    const r = await adapter.lifecycle.createNew(h.name);
    assert.ok(!r.ok && r.error.code === 'already_exists');
    assert.equal(isTransient(r.error), false);
    assert.equal(text(file(h.name, '/home/sprite/a.txt')!.data), 'legacy');
    const info = await adapter.lifecycle.get(h);
    assert.ok(info.ok && info.value.raw.id === undefined, 'still the legacy sandbox');
  });

  it('of two concurrent create_new calls exactly one wins, and get.raw.id is its instance_id', async () => {
    const name = `fake-race-${++n}`;
    const [a, b] = await Promise.all([adapter.lifecycle.createNew(name), adapter.lifecycle.createNew(name)]);
    const winners = [a, b].filter((r) => r.ok);
    assert.equal(winners.length, 1);
    const loser = [a, b].find((r) => !r.ok)!;
    assert.ok(!loser.ok && loser.error.code === 'already_exists');
    const won = winners[0]!;
    assert.ok(won.ok);
    assert.match(won.value.instanceId ?? '', /^fake-\d+$/);
    const info = await adapter.lifecycle.get(won.value);
    assert.ok(info.ok);
    assert.equal(info.value.raw.id, won.value.instanceId);
    assert.equal(info.value.raw.name, name);
  });

  it('records allow: [] verbatim', async () => {
    const h = await fresh();
    assert.equal(policy(h.name), undefined);
    assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: [] })).ok);
    assert.deepEqual(policy(h.name), { allow: [] });
    assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com'] })).ok);
    assert.deepEqual(policy(h.name), { allow: ['api.example.com'] });
  });

  it('exec on drop is the closed_before_exit error, not partial output', async () => {
    const h = await fresh();
    const r = await adapter.processes.exec(h, 'x', ['out:partial', 'drop']);
    assert.ok(!r.ok);
    assert.deepEqual(r.error, { code: 'closed_before_exit' });
    assert.equal(isTransient(r.error), true);
  });

  it('attach after a drop replays stdout, then the error, and no exit', async () => {
    const h = await fresh();
    const first = new FrameCollector();
    const spawned = await adapter.processes.spawn(h, 'x', ['out:one', 'drop'], { owner: first.sink });
    assert.ok(spawned.ok);
    await first.terminal(spawned.value.ref, T);
    const sessions = await adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value.length === 1);
    const second = new FrameCollector();
    const att = await adapter.processes.attach(h, sessions.value[0]!.id, { owner: second.sink });
    assert.ok(att.ok);
    const out = await second.nextStdout(att.value.ref, T);
    assert.equal(text(out.data), 'one');
    const end = await second.terminal(att.value.ref, T);
    assert.equal(end.type, 'error');
    assert.ok(end.type === 'error' && end.error.code === 'closed_before_exit');
    await second.expectSettled(att.value.ref, (f) => f.type === 'exit', 'an exit');
  });

  it('write_file with mode 0o600 reads back bytes and mode', async () => {
    const h = await fresh();
    const bytes = Uint8Array.from([0, 1, 2, 255, 10]);
    assert.ok((await adapter.files.writeFile(h, '/home/sprite/k', bytes, { mode: 0o600 })).ok);
    assert.deepEqual(file(h.name, '/home/sprite/k'), { data: bytes, mode: 0o600 });
  });

  it('a missing sandbox or session is not_found for suspend, attach and network policy', async () => {
    const ghost = adapter.buildHandle('fake-never-created');
    for (const r of [
      await adapter.network.applyNetworkPolicy(ghost, { allow: [] }),
      await adapter.lifecycle.suspend(ghost),
      await adapter.processes.attach(ghost, 'fake-sess-1', { owner: () => {} }),
    ]) {
      assert.ok(!r.ok && r.error.code === 'not_found', JSON.stringify(r));
    }
    const h = await fresh();
    const r = await adapter.processes.attach(h, 'fake-sess-999999', { owner: () => {} });
    assert.ok(!r.ok && r.error.code === 'not_found');
  });

  it('exec drops stderr unless merged', async () => {
    const h = await fresh();
    const plain = await adapter.processes.exec(h, 'x', ['out:a', 'err:b', 'out:c', 'exit:4']);
    assert.ok(plain.ok);
    assert.deepEqual([text(plain.value.output), plain.value.exitCode], ['ac', 4]);
    const merged = await adapter.processes.exec(h, 'x', ['out:a', 'err:b', 'out:c'], { stderrToStdout: true });
    assert.ok(merged.ok);
    assert.deepEqual([text(merged.value.output), merged.value.exitCode], ['abc', 0]);
    const firstExit = await adapter.processes.exec(h, 'x', ['exit:2', 'out:never', 'exit:5']);
    assert.ok(firstExit.ok && firstExit.value.exitCode === 2 && firstExit.value.output.byteLength === 0);
  });

  it('an auto-exit replays stderr and exit 0 to an attacher', async () => {
    const h = await fresh();
    const first = new FrameCollector();
    const spawned = await adapter.processes.spawn(h, 'x', ['err:oops'], { owner: first.sink });
    assert.ok(spawned.ok);
    await first.terminal(spawned.value.ref, T);
    const sessions = await adapter.processes.listSessions(h);
    assert.ok(sessions.ok);
    assert.equal(sessions.value[0]!.exitCode, 0);
    const second = new FrameCollector();
    const att = await adapter.processes.attach(h, sessions.value[0]!.id, { owner: second.sink });
    assert.ok(att.ok);
    const err = await second.next((f) => f.type === 'stderr', T);
    assert.ok(err.type === 'stderr' && text(err.data) === 'oops');
    const end = await second.terminal(att.value.ref, T);
    assert.ok(end.type === 'exit' && end.code === 0);
    await second.expectSettled(att.value.ref);
  });

  it('terminate_session: validation, missing session ok or unconfirmed with force, live session gets exit 137', async () => {
    const h = await fresh();
    for (const [id, opts] of [
      ['', {}],
      ['bad id!', {}],
      ['x'.repeat(257), {}],
      ['ok', { timeoutMs: 0 }],
      ['ok', { timeoutMs: 30_001 }],
      ['ok', { bogus: 1 }],
    ] as const) {
      const r = await adapter.processes.terminateSession(h, id, opts as never);
      assert.ok(
        !r.ok && r.error.code === 'invalid' && r.error.detail === 'termination_request',
        `${id} ${JSON.stringify(opts)}`,
      );
    }
    assert.ok((await adapter.processes.terminateSession(h, 'fake-sess-missing')).ok);
    const forced = await adapter.processes.terminateSession(h, 'fake-sess-missing', { mode: 'force' });
    assert.ok(!forced.ok && forced.error.code === 'unavailable' && forced.error.detail === 'termination_unconfirmed');
    const frames = new FrameCollector();
    const spawned = await adapter.processes.spawn(h, 'x', ['out:up', 'stay'], { owner: frames.sink });
    assert.ok(spawned.ok);
    await frames.nextStdout(spawned.value.ref, T);
    const sessions = await adapter.processes.listSessions(h);
    assert.ok(sessions.ok);
    assert.ok((await adapter.processes.terminateSession(h, sessions.value[0]!.id, { mode: 'force' })).ok);
    const end = await frames.terminal(spawned.value.ref, T);
    assert.ok(end.type === 'exit' && end.code === 137);
    await frames.expectSettled(spawned.value.ref);
  });

  it('a stopped command no longer takes stdin (command_exited), but the process lives on for attach', async () => {
    const h = await fresh();
    const frames = new FrameCollector();
    const spawned = await adapter.processes.spawn(h, 'x', ['out:up', 'stay'], { owner: frames.sink });
    assert.ok(spawned.ok);
    await frames.nextStdout(spawned.value.ref, T);
    assert.ok((await adapter.processes.stopCommand(spawned.value)).ok);
    const w = await adapter.processes.writeStdin(spawned.value, new TextEncoder().encode('x'));
    assert.ok(!w.ok && w.error.code === 'command_exited');
    const c = await adapter.processes.closeStdin(spawned.value);
    assert.ok(!c.ok && c.error.code === 'command_exited');
    const sessions = await adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value[0]!.exitCode === undefined, 'still running');
  });

  it('suspend and resume flip the status; resume keeps instance_id', async () => {
    const created = await adapter.lifecycle.createNew(`fake-sr-${++n}`);
    assert.ok(created.ok);
    assert.ok((await adapter.lifecycle.suspend(created.value)).ok);
    const g1 = await adapter.lifecycle.get(created.value);
    assert.ok(g1.ok && g1.value.status === 'suspended');
    const resumed = await adapter.lifecycle.resume(created.value);
    assert.ok(resumed.ok && resumed.value.instanceId === created.value.instanceId);
    const g2 = await adapter.lifecycle.get(resumed.value);
    assert.ok(g2.ok && g2.value.status === 'running');
  });

  it('reset() forgets every sandbox', async () => {
    const h = await fresh();
    reset();
    const r = await adapter.lifecycle.get(h);
    assert.ok(!r.ok && r.error.code === 'not_found');
  });
});
