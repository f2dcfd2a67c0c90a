/**
 * An agent's warnings over the public HTTP API (issue 20): create and update answers carry `warnings`,
 * backend_lacks_network_policy for a limited environment on a runner that cannot enforce it; saved anyway.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import type { FakeDaemon } from '../src/providers/runner/fake-daemon.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { FOUNTAIN_BIN } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { callAs as call, dialFake } from './helpers/fake-runner.ts';
import type { Json } from './helpers/http.ts';

const codes = (r: { body: Json }) => (r.body.data.warnings as Json[]).map((w) => w.code);

describe('agent warnings over HTTP', () => {
  let tmp: string;
  let srv: RunningServer;
  let plain: FakeDaemon;
  let ns: FakeDaemon | undefined;
  let limited = '';

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-warn-')));
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, acceptRunnerSocket });
    plain = await dialFake(srv, 'plain');
    const env = await call(srv, 'POST', '/api/environments', {
      name: 'locked',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['example.test'] },
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    limited = env.body.data.id;
  });

  after(async () => {
    await plain?.stop();
    await ns?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('the CLI says the warnings on stderr and still creates and updates the agent (exit 0)', async () => {
    const env = {
      ...process.env,
      FOUNTAIN_API_KEY: srv.bootstrapKey!,
      FOUNTAIN_BASE_URL: srv.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: join(tmp, 'cli-home'),
    };
    const cli = (...args: string[]) => promisify(execFile)(process.execPath, [FOUNTAIN_BIN, ...args], { env });
    const created = await cli(
      'agents',
      'create',
      '--name',
      'cli-pinned',
      '--runtime',
      'demo',
      '--environment',
      'locked',
      '--runner',
      'plain',
    );
    assert.match(created.stdout, /created agent cli-pinned/);
    assert.match(created.stderr, /^warning: .*locked.*plain/m);
    const updated = await cli('agents', 'update', 'cli-pinned', '--system', 'be brief');
    assert.match(updated.stdout, /updated agent cli-pinned/);
    assert.match(updated.stderr, /^warning: /m);
    const quiet = await cli('agents', 'update', 'cli-pinned', '--no-runner', '--environment', 'locked');
    assert.match(quiet.stderr, /^warning: /m, "any runner: none of the account's runners enforces it");
  });

  it('warns, and still saves, a limited environment pinned to a runner without network_policy', async () => {
    const r = await call(srv, 'POST', '/api/agents', {
      name: 'pinned',
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: limited,
      runner_id: 'plain',
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(codes(r), ['backend_lacks_network_policy']);
    const message: string = r.body.data.warnings[0].message;
    assert.match(message, /locked/);
    assert.match(message, /plain/);
    assert.equal((await call(srv, 'GET', `/api/agents/${r.body.data.id}`)).status, 200, 'saved');
  });

  it('warns for "any runner" while none of the account\'s runners has network_policy; none without an environment', async () => {
    const any = await call(srv, 'POST', '/api/agents', {
      name: 'any',
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: limited,
    });
    assert.equal(any.status, 201, JSON.stringify(any.body));
    assert.deepEqual(codes(any), ['backend_lacks_network_policy']);
    const open = await call(srv, 'POST', '/api/agents', {
      name: 'open',
      runtime: 'demo',
      model: 'fountain/demo',
      runner_id: 'plain',
    });
    assert.deepEqual(open.body.data.warnings, []);
    const patched = await call(srv, 'PATCH', `/api/agents/${open.body.data.id}`, { environment_id: limited });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.deepEqual(codes(patched), ['backend_lacks_network_policy']);
  });

  it('says nothing once the placement can enforce it (PATCH and PUT answers)', async () => {
    ns = await dialFake(srv, 'ns', ['suspend', 'attach', 'network_policy']);
    const agents = (await call(srv, 'GET', '/api/agents')).body.data as Json[];
    const id = (name: string) => agents.find((a) => a.name === name)!.id;
    const repinned = await call(srv, 'PATCH', `/api/agents/${id('pinned')}`, { runner_id: 'ns' });
    assert.equal(repinned.status, 200, JSON.stringify(repinned.body));
    assert.deepEqual(repinned.body.data.warnings, []);
    const any = await call(srv, 'PUT', `/api/agents/${id('any')}`, { description: 'now a runner can enforce it' });
    assert.equal(any.status, 200, JSON.stringify(any.body));
    assert.deepEqual(any.body.data.warnings, []);
    const still = await call(srv, 'PUT', `/api/agents/${id('open')}`, { runner_id: 'plain' });
    assert.deepEqual(
      codes(still),
      ['backend_lacks_network_policy'],
      'a runner pinned to one without the capability still warns',
    );
  });

  it('warns a brokered account of a runner without network_policy even without an environment', async () => {
    assert.equal((await call(srv, 'PATCH', '/api/account', { credential_brokerage: true })).status, 200);
    const plainPin = await call(srv, 'POST', '/api/agents', {
      name: 'brokered',
      runtime: 'demo',
      model: 'fountain/demo',
      runner_id: 'plain',
    });
    assert.equal(plainPin.status, 201, JSON.stringify(plainPin.body));
    assert.deepEqual(codes(plainPin), ['backend_lacks_network_policy']);
    assert.match(plainPin.body.data.warnings[0].message, /brokerage/i);
    const nsPin = await call(srv, 'PATCH', `/api/agents/${plainPin.body.data.id}`, { runner_id: 'ns' });
    assert.deepEqual(nsPin.body.data.warnings, []);
  });
});
