/**
 * The brokerage gate over the public HTTP API (issue 6 item 4): a real fountain server, fake runner
 * daemons dialing it with an API key, refusals and allowances by account setting and capability.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import type { FakeDaemon } from '../src/providers/runner/fake-daemon.ts';
import { until } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { callAs as call, dialFake } from './helpers/fake-runner.ts';
import type { Json } from './helpers/http.ts';

async function waitOffline(srv: RunningServer, name: string): Promise<void> {
  await until(
    async () =>
      ((await call(srv, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.name === name && !r.online),
    `runner ${name} offline`,
  );
}

const creates = (d: FakeDaemon) => d.received.filter((r) => r.op === 'create').length;

async function demoAgent(srv: RunningServer): Promise<string> {
  const a = await call(srv, 'POST', '/api/agents', {
    name: 'demo',
    runtime: 'demo',
    model: 'fountain/demo',
    system: '',
  });
  assert.equal(a.status, 201, JSON.stringify(a.body));
  return a.body.data.id;
}

// Provisioning on a fake daemon cannot run the demo agent; a short ACP budget lets it fail fast.
const ENGINE = { acpCallTimeoutMs: 1500, installTimeoutMs: 3000, idleTimeoutMs: 0 };

describe('credential brokerage gate over HTTP', () => {
  let tmp: string;
  let srv: RunningServer;
  let agentId: string;
  let plain: FakeDaemon;
  let ns: FakeDaemon | undefined;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-gate-')));
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, acceptRunnerSocket, engine: ENGINE });
    agentId = await demoAgent(srv);
    plain = await dialFake(srv, 'plain');
  });

  after(async () => {
    await plain?.stop();
    await ns?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('reads and validates the account setting', async () => {
    const got = await call(srv, 'GET', '/api/account');
    assert.equal(got.status, 200);
    assert.equal(got.body.data.credential_brokerage, false);
    const bad = await call(srv, 'PATCH', '/api/account', { credential_brokerage: 'yes' });
    assert.equal(bad.status, 422);
    assert.equal((await call(srv, 'PATCH', '/api/account', {})).status, 422);
    assert.equal((await call(srv, 'PATCH', '/api/account', { credential_brokerage: true, extra: 1 })).status, 422);
    const on = await call(srv, 'PATCH', '/api/account', { credential_brokerage: true });
    assert.deepEqual([on.status, on.body.data.credential_brokerage], [200, true]);
    assert.equal((await call(srv, 'GET', '/api/account')).body.data.credential_brokerage, true);
  });

  it('refuses a launch on a runner without network_policy before any sandbox exists', async () => {
    await call(srv, 'PATCH', '/api/account', { credential_brokerage: true });
    const before = creates(plain);
    const r = await call(srv, 'POST', '/api/conversations', { agent_id: agentId, prompt: 'hello' });
    assert.equal(r.status, 422, JSON.stringify(r.body));
    assert.equal(r.body.error, 'backend_lacks_network_policy');
    assert.match(r.body.message, /credential brokerage/);
    assert.equal(r.body.provider, 'runner');
    assert.equal(creates(plain), before, 'no sandbox was created on the runner');
    const conv = await call(srv, 'GET', `/api/conversations/${r.body.conversation_id}`);
    assert.equal(conv.body.data.status, 'failed');
    const ev = await until(async () => {
      const page = await call(srv, 'GET', `/api/conversations/${r.body.conversation_id}/events?streams=stage`);
      return (page.body.data as Json[]).find((e) => e.stage === 'network' && e.state === 'failed');
    }, 'the network/failed event');
    const data = JSON.parse(ev.data);
    assert.deepEqual([data.type, data.provider, data.reason], ['limited', 'runner', 'backend_lacks_network_policy']);
  });

  it('allows the launch when the setting is off', async () => {
    await call(srv, 'PATCH', '/api/account', { credential_brokerage: false });
    const before = creates(plain);
    const r = await call(srv, 'POST', '/api/conversations', { agent_id: agentId });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await until(() => creates(plain) > before, 'the sandbox create on the runner');
  });

  it('allows the launch on a runner advertising network_policy', async () => {
    await call(srv, 'PATCH', '/api/account', { credential_brokerage: true });
    await plain.stop();
    await waitOffline(srv, 'plain');
    ns = await dialFake(srv, 'ns', ['suspend', 'attach', 'network_policy']);
    const r = await call(srv, 'POST', '/api/conversations', { agent_id: agentId });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.data.sandbox.runner.name, 'ns');
    await until(() => creates(ns!) > 0, 'the sandbox create on the namespace runner');
  });
});

describe('BROKER_ALLOW_UNENFORCED lifts the refusal', () => {
  let tmp: string;
  let srv: RunningServer;
  let plain: FakeDaemon;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-gate-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { BROKER_ALLOW_UNENFORCED: 'true' },
      acceptRunnerSocket,
      engine: ENGINE,
    });
    plain = await dialFake(srv, 'plain');
  });

  after(async () => {
    await plain?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('launches on a runner without network_policy with brokerage on', async () => {
    const agentId = await demoAgent(srv);
    assert.equal((await call(srv, 'PATCH', '/api/account', { credential_brokerage: true })).status, 200);
    const r = await call(srv, 'POST', '/api/conversations', { agent_id: agentId });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await until(() => creates(plain) > 0, 'the sandbox create on the runner');
  });
});
