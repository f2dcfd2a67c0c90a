/**
 * Agent environments on the namespace backend (issue 17), where `limited` is enforced: the policy is
 * applied through the runner, the agent sees the variable, the secret, an npm package and the setup
 * script's work, and a repository on a host the policy does not allow fails the clone step in words.
 * Needs root and bubblewrap (skipped otherwise, with the reason).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { namespaceSupportProblem } from '../src/runner/backends/namespace/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { allEvents, apiFor, ask, leaks, npmTarball, stages, waitStage } from './helpers/environments.ts';
import type { Json } from './helpers/http.ts';

const nsProblem = namespaceSupportProblem();
/** Keeps this file's namespace links apart from other runs on the machine. */
const octet = 20 + ((process.pid + 71) % 200);

describe('environments on a namespace runner', { skip: nsProblem ?? false }, () => {
  const SECRET = `ns-secret-${randomBytes(12).toString('hex')}`;
  const schema = uniqueSchemaName();
  let tmp: string;
  let shared: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  const api = apiFor(() => srv.url, () => key);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-envs-ns-')));
    // Sandboxes get a private /tmp and run as their own uid: the package lives where they can read it.
    shared = mkdtempSync('/var/tmp/fountain-envs-ns-');
    chmodSync(shared, 0o755);
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL }, databaseSchema: schema });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({ name: 'ns', root: join(tmp, 'sandboxes'), baseUrl: srv.url, apiKey: key, home: tmp, extraArgs: ['--backend', 'namespace', '--ns-subnet', `10.61.${octet}.0/24`] });
    await until(async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online), 'the runner online', 60_000);
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
    if (shared) rmSync(shared, { recursive: true, force: true });
  });

  it('applies a limited network and the agent sees the variable, the secret, the package and the setup', async () => {
    const tarball = await npmTarball(shared, 'fountain-ns-hello', 'hello from npm in a namespace');
    chmodSync(tarball, 0o644);
    const env = await api('POST', '/api/environments', {
      name: 'ns-project',
      env_vars: { GREETING: 'hello-ns' },
      secrets: { API_TOKEN: SECRET },
      packages: { npm: [tarball] },
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['registry.npmjs.org'] },
      setup_script: 'echo "setup in ns: $GREETING" > /home/sprite/setup-marker',
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await api('POST', '/api/agents', { name: 'ns-builder', permission_policy: { default: 'auto_allow' }, runtime: 'demo', model: 'fountain/demo', environment_id: env.body.data.id });
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await waitStage(api, id, 'provision/done');
    const seen = await stages(api, id);
    assert.deepEqual(
      seen.map((s) => s.what).filter((w) => !w.startsWith('provision/')),
      ['packages/started', 'packages/done', 'network/started', 'network/done', 'setup/started', 'setup/done'],
    );
    assert.deepEqual(seen.find((s) => s.what === 'network/done')?.data, { type: 'limited', hosts: ['registry.npmjs.org'] });
    assert.match(await ask(api, id, 'run: printenv GREETING'), /hello-ns/);
    assert.match(await ask(api, id, 'run: printf %s "$API_TOKEN" | sha256sum'), new RegExp(createHash('sha256').update(SECRET).digest('hex')));
    assert.match(await ask(api, id, 'run: fountain-ns-hello'), /hello from npm in a namespace/);
    assert.match(await ask(api, id, 'run: cat /home/sprite/setup-marker'), /setup in ns: hello-ns/);
    assert.deepEqual(leaks({ events: JSON.stringify(await allEvents(api, id)), 'runner log': runner.stderr() }, [SECRET]), []);
  });

  it('a repository on a host the limited network does not allow fails the clone step, naming the host', async () => {
    const env = await api('POST', '/api/environments', {
      name: 'ns-closed',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['registry.npmjs.org'] },
      repositories: [{ url: 'https://git.example.test/org/app.git' }],
    });
    const agent = await api('POST', '/api/agents', { name: 'ns-closed', permission_policy: { default: 'auto_allow' }, runtime: 'demo', model: 'fountain/demo', environment_id: env.body.data.id });
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    const failed = await waitStage(api, created.body.data.id, 'provision/failed');
    assert.equal(failed.data.step, 'clone');
    assert.match(failed.data.reason, /limited and does not allow git\.example\.test: add it to networking_config\.allowed_hosts/);
    assert.equal((await api('GET', `/api/conversations/${created.body.data.id}`)).body.data.status, 'failed');
  });
});
