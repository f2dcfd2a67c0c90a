/**
 * Agent environments on a vendor provider (issue 17): the `e2b` adapter against the loopback E2B stub,
 * with a `limited` network (applied through PUT /network), a variable, a secret, an npm package from a
 * local tarball, a repository cloned over https from a local git server, and a setup script; the demo
 * agent sees each, and no event or log line holds the secret or the clone token.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { E2BAdapter } from '../src/providers/e2b/index.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { E2BStub } from './stubs/e2b/server.ts';
import { startGitHttpsServer, type GitHttpsServer } from './helpers/git-https.ts';
import { allEvents, apiFor, ask, leaks, npmTarball, stages, waitStage } from './helpers/environments.ts';

describe('environments on the e2b provider against the stub', () => {
  const KEY = `e2b_env_${randomBytes(8).toString('hex')}`;
  const SECRET = `e2b-secret-${randomBytes(12).toString('hex')}`;
  const CLONE_TOKEN = `e2b-clone-${randomBytes(12).toString('hex')}`;
  const schema = uniqueSchemaName();
  const logLines: string[] = [];
  let tmp: string;
  let stub: E2BStub;
  let adapter: E2BAdapter;
  let git: GitHttpsServer;
  let srv: RunningServer;
  let key: string;
  const api = apiFor(() => srv.url, () => key);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-envs-e2b-')));
    git = await startGitHttpsServer(join(tmp, 'git'), CLONE_TOKEN);
    git.addRepo('private/service', { 'README.md': 'the service\n' });
    stub = await E2BStub.start({ apiKey: KEY });
    adapter = new E2BAdapter({ apiKey: KEY, baseUrl: stub.apiUrl, sandboxUrl: stub.sandboxUrl, requestTimeoutMs: 30_000 });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, E2B_API_KEY: KEY, E2B_BASE_URL: stub.apiUrl, E2B_SANDBOX_URL: stub.sandboxUrl, SANDBOX_PROVIDER: 'e2b' },
      databaseSchema: schema,
      adapters: [adapter],
      logger: pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) }),
      engine: { idleTimeoutMs: 60 * 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await srv?.stop();
    adapter?.close();
    await stub?.stop();
    await git?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('provisions a limited environment and the agent sees each part', async () => {
    const tarball = await npmTarball(join(tmp, 'npm'), 'fountain-e2b-hello', 'hello from npm on e2b');
    const env = await api('POST', '/api/environments', {
      name: 'e2b-project',
      // The stub has no image: the image's npm prefix (images/e2b) is given as a variable here.
      env_vars: { GREETING: 'hello-e2b', GIT_SSL_CAINFO: git.caFile, npm_config_prefix: '/home/sprite/.npm-global' },
      secrets: { API_TOKEN: SECRET, CLONE_TOKEN },
      packages: { npm: [tarball] },
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['localhost', 'registry.npmjs.org'] },
      repositories: [{ url: `${git.url}/private/service.git`, secret_key: 'CLONE_TOKEN' }],
      setup_script: 'echo "setup on e2b: $GREETING" > /home/sprite/setup-marker',
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await api('POST', '/api/agents', { name: 'e2b-builder', permission_policy: { default: 'auto_allow' }, runtime: 'demo', model: 'fountain/demo', sandbox_provider: 'e2b', environment_id: env.body.data.id });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await waitStage(api, id, 'provision/done');
    const seen = await stages(api, id);
    assert.deepEqual(
      seen.map((s) => s.what).filter((w) => !w.startsWith('provision/')),
      ['packages/started', 'packages/done', 'network/started', 'network/done', 'clone/started', 'clone/done', 'setup/started', 'setup/done'],
    );
    assert.deepEqual(seen.find((s) => s.what === 'network/done')?.data, { type: 'limited', hosts: ['localhost', 'registry.npmjs.org'] });
    const sandbox = stub.list().find((s) => s.state === 'running');
    assert.deepEqual(sandbox?.network?.allowOut, ['localhost', 'registry.npmjs.org'], 'the policy reached E2B');

    assert.match(await ask(api, id, 'run: printenv GREETING'), /hello-e2b/);
    assert.match(await ask(api, id, 'run: printf %s "$API_TOKEN" | sha256sum'), new RegExp(createHash('sha256').update(SECRET).digest('hex')));
    assert.match(await ask(api, id, 'run: /home/sprite/.npm-global/bin/fountain-e2b-hello'), /hello from npm on e2b/);
    assert.match(await ask(api, id, 'run: cat /home/sprite/service/README.md /home/sprite/setup-marker'), /the service[\s\S]*setup on e2b: hello-e2b/);
    assert.doesNotMatch(await ask(api, id, 'run: cat /home/sprite/.env /home/sprite/service/.git/config'), /e2b-secret|e2b-clone/);

    const events = JSON.stringify(await allEvents(api, id));
    const requests = JSON.stringify(stub.requests.filter((r) => r.path !== '/process.Process/Start'));
    assert.deepEqual(leaks({ events, 'server log': logLines.join(''), 'E2B calls other than process starts': requests }, [SECRET, CLONE_TOKEN]), []);
  });
});
