/**
 * Agent environments end to end (issue 17) through the public API, on a real `fountain runner` child
 * (process backend) with the demo agent: variables, secrets (environment and launch-attached), an npm
 * package from a local tarball, a repository cloned over https from a local git server with a token,
 * a setup script, inline and git-sourced skills, an MCP server with ${VAR}; reuse on wake; a failure
 * at each step; and a search of every log line, event, error and process listing for the secrets.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { startGitHttpsServer, type GitHttpsServer } from './helpers/git-https.ts';
import { allEvents, apiFor, ask, failProvision, leaks, npmTarball, stages, waitStage } from './helpers/environments.ts';
import type { Json } from './helpers/http.ts';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('environments on a runner (process backend) with the demo agent', () => {
  const ENV_SECRET = `env-secret-${randomBytes(12).toString('hex')}`;
  const LAUNCH_SECRET = `launch-secret-${randomBytes(12).toString('hex')}`;
  const CLONE_TOKEN = `clone-token-${randomBytes(12).toString('hex')}`;
  const SECRETS = [ENV_SECRET, LAUNCH_SECRET, CLONE_TOKEN];
  const schema = uniqueSchemaName();
  const logLines: string[] = [];
  let tmp: string;
  let git: GitHttpsServer;
  let tarball: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  const api = apiFor(
    () => srv.url,
    () => key,
  );
  const sandboxes = () => join(tmp, 'sandboxes');
  const errors: string[] = [];
  /** Every API reply body, kept for the final search. */
  const replies: string[] = [];
  const tracked = async (method: string, path: string, body?: unknown) => {
    const r = await api(method, path, body);
    replies.push(JSON.stringify(r.body));
    return r;
  };

  const baseEnvironment = () => ({
    name: 'project',
    env_vars: { GREETING: 'hello-from-env', GIT_SSL_CAINFO: git.caFile },
    secrets: { API_TOKEN: ENV_SECRET, CLONE_TOKEN },
    packages: { npm: [tarball] },
    repositories: [{ url: `${git.url}/private/app.git`, mount_path: 'app', secret_key: 'CLONE_TOKEN' }],
    setup_script:
      'echo "setup ran with $GREETING" > /home/sprite/setup-marker\nprintf %s "$API_TOKEN" | wc -c > /home/sprite/secret-length',
  });

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-envs-')));
    git = await startGitHttpsServer(join(tmp, 'git'), CLONE_TOKEN);
    git.addRepo('private/app', { 'README.md': 'the app, version one\n' });
    git.addRepo('acme/skills', {
      'skills/lint/SKILL.md': '# lint\nLint the code.\n',
      'skills/other/SKILL.md': '# other\n',
    });
    tarball = await npmTarball(join(tmp, 'npm'), 'fountain-env-hello', 'hello from an npm package');
    const logger = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {
        FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
        FOUNTAIN_SKILLS_GIT_URL: git.url,
        FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex'),
      },
      databaseSchema: schema,
      logger,
      engine: { idleTimeoutMs: 60 * 60_000, sweepIntervalMs: 3_600_000 },
    });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({
      name: 'envs',
      root: sandboxes(),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
      extraArgs: ['--log-level', 'debug'],
    });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner online',
      60_000,
    );
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await git?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('manages environments and write-only secrets, and validates what it is given', async () => {
    const bad = async (body: Json, field: RegExp) => {
      const r = await tracked('POST', '/api/environments', { name: `bad-${randomBytes(3).toString('hex')}`, ...body });
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.match(JSON.stringify(r.body.errors ?? r.body), field);
    };
    await bad({ repositories: [{ url: 'http://example.test/a.git' }] }, /only https/);
    await bad({ repositories: [{ url: `https://x-access-token:${CLONE_TOKEN}@example.test/a.git` }] }, /secret_key/);
    await bad({ env_vars: { FOUNTAIN_TOKEN: 'x' } }, /reserved/);
    await bad({ networking_type: 'limited', networking_config: { allowed_hosts: ['https://a.test'] } }, /domain/);
    await bad({ packages: { apt: ['--purge'] } }, /apt/);
    await bad({ repositories: [{ url: 'https://example.test/a.git', mount_path: '/etc/x' }] }, /home\/sprite/);

    const created = await tracked('POST', '/api/environments', {
      name: 'scratch',
      env_vars: { A: '1' },
      secrets: { S1: ENV_SECRET },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const env = created.body.data;
    assert.deepEqual(env.secret_keys, ['S1']);
    assert.equal(env.networking_type, 'unrestricted');
    const put = await tracked('PUT', `/api/environments/${env.id}/secrets/S2`, { value: LAUNCH_SECRET });
    assert.deepEqual([put.status, put.body], [201, { data: { key: 'S2' } }]);
    assert.equal((await tracked('PUT', `/api/environments/${env.id}/secrets/S2`, { value: 'again' })).status, 200);
    assert.equal((await tracked('PUT', `/api/environments/${env.id}/secrets/bad-name`, { value: 'x' })).status, 422);
    const names = await tracked('GET', `/api/environments/${env.id}/secrets`);
    assert.deepEqual(
      names.body.data.map((s: Json) => s.key),
      ['S1', 'S2'],
    );
    const patched = await tracked('PATCH', `/api/environments/${env.id}`, {
      setup_script: 'true',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['*.example.test'] },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.deepEqual(patched.body.data.networking_config, { allowed_hosts: ['*.example.test'] });
    assert.equal((await tracked('DELETE', `/api/environments/${env.id}/secrets/S2`)).status, 204);
    assert.equal((await tracked('DELETE', `/api/environments/${env.id}/secrets/S2`)).status, 404);
    assert.equal((await tracked('GET', '/api/environments')).body.data.length, 1);
    // The stored value is sealed: neither the row nor the API holds the plaintext.
    const raw = await srv.database.db.execute(`SELECT sealed FROM environment_secrets` as never);
    assert.ok(!JSON.stringify(raw).includes(ENV_SECRET), 'the secret is sealed at rest');
    assert.equal(
      (await tracked('GET', '/api/environments/00000000-0000-0000-0000-000000000000')).body.error,
      'environment_not_found',
    );
    const agent = await tracked('POST', '/api/agents', {
      name: 'orphan',
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: '00000000-0000-0000-0000-000000000000',
    });
    assert.deepEqual([agent.status, agent.body.error], [404, 'environment_not_found']);
    assert.equal((await tracked('DELETE', `/api/environments/${env.id}`)).status, 204);
    assert.deepEqual(leaks({ replies: replies.join('\n') }, SECRETS), []);
  });

  let conv: Json;
  let envId: string;
  let agentId: string;

  it('provisions every step in order and the agent sees each; nothing leaks', async () => {
    const env = await tracked('POST', '/api/environments', baseEnvironment());
    assert.equal(env.status, 201, JSON.stringify(env.body));
    envId = env.body.data.id;
    const agent = await tracked('POST', '/api/agents', {
      name: 'builder',
      runtime: 'demo',
      model: 'fountain/demo',
      // The test is about what the provisioned agent sees: its commands run unasked (new agents ask by default).
      permission_policy: { default: 'auto_allow' },
      environment_id: envId,
      skills: [
        { name: 'greeter', content: '# greeter\nSay hello.\n' },
        { source: 'acme/skills', name: 'lint' },
      ],
      mcp_servers: {
        docs: {
          type: 'http',
          url: 'https://mcp.example.test/${GREETING}',
          headers: { Authorization: 'Bearer ${API_TOKEN}' },
        },
      },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
    assert.equal(agent.body.data.environment_id, envId);
    assert.equal(
      (await tracked('GET', `/api/agents?environment_id=${envId}&has_skills=true&has_mcp=true`)).body.data.length,
      1,
    );

    const created = await tracked('POST', '/api/conversations', {
      agent_id: agentId,
      secrets: { API_TOKEN: LAUNCH_SECRET },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    conv = created.body.data;
    await waitStage(api, conv.id, 'provision/done');
    const order = (await stages(api, conv.id)).map((s) => s.what);
    assert.deepEqual(
      order.filter((w) => !w.startsWith('sandbox/')),
      [
        'provision/started',
        'skills/started',
        'skills/done',
        'packages/started',
        'packages/done',
        'clone/started',
        'clone/done',
        'setup/started',
        'setup/done',
        'provision/done',
      ],
    );

    assert.match(await ask(api, conv.id, 'run: printenv GREETING'), /hello-from-env/);
    // Launch-attached secrets win over the environment's; the value is compared by hash so no event holds it.
    assert.match(await ask(api, conv.id, 'run: printf %s "$API_TOKEN" | sha256sum'), new RegExp(sha(LAUNCH_SECRET)));
    assert.match(await ask(api, conv.id, 'run: fountain-env-hello'), /hello from an npm package/);
    assert.match(await ask(api, conv.id, 'run: cat app/README.md'), /the app, version one/);
    assert.doesNotMatch(
      await ask(api, conv.id, 'run: git -C app remote get-url origin; cat app/.git/config'),
      /clone-token|x-access-token/,
    );
    assert.match(
      await ask(api, conv.id, 'run: cat setup-marker secret-length'),
      new RegExp(`setup ran with hello-from-env[\\s\\S]*${LAUNCH_SECRET.length}`),
    );
    assert.match(
      await ask(api, conv.id, 'run: ls .demo/skills; cat .demo/skills/lint/SKILL.md'),
      /greeter[\s\S]*lint[\s\S]*Lint the code/,
    );
    assert.doesNotMatch(await ask(api, conv.id, 'run: ls .demo/skills'), /other/);
    assert.match(
      await ask(api, conv.id, 'mcp servers'),
      /docs: http https:\/\/mcp\.example\.test\/hello-from-env headers: Authorization/,
    );

    // .env holds the variables, never a secret.
    const sandboxDir = join(sandboxes(), conv.sandbox.name);
    const dotenv = readFileSync(join(sandboxDir, '.env'), 'utf8');
    assert.match(dotenv, /GREETING='hello-from-env'/);
    // Process listings: the agent runs with the secret in its env, never in an argv.
    const ps = execFileSync('ps', ['-eww', '-o', 'args'], { encoding: 'utf8' });
    assert.deepEqual(leaks({ '.env': dotenv, 'process listing': ps }, SECRETS), []);
    assert.ok(
      git.requests.some((r) => r.path.startsWith('/private/') && r.authorized),
      'the clone carried the token',
    );
  });

  it('a parked sandbox wakes without redoing steps; a changed environment reruns only what changed', async () => {
    const mark = (await stages(api, conv.id)).at(-1)!.id;
    // The sweep parks only an idle conversation: the last turn's end may still be settling.
    const park = (hours: number) =>
      until(async () => {
        await srv.engine.sweep(new Date(Date.now() + hours * 3_600_000));
        return (await api('GET', `/api/conversations/${conv.id}`)).body.data.sandbox.status === 'suspended';
      }, 'the sandbox to park');
    await park(3);
    assert.match(await ask(api, conv.id, 'run: cat setup-marker'), /setup ran/);
    const woke = (await stages(api, conv.id, mark)).map((s) => s.what);
    assert.ok(
      !woke.some((w) => /^(skills|packages|clone|setup|provision)\//.test(w)),
      `no step ran again: ${woke.join(', ')}`,
    );

    const changed = await tracked('PATCH', `/api/environments/${envId}`, {
      env_vars: { GREETING: 'hello-again', GIT_SSL_CAINFO: git.caFile },
      setup_script: 'echo "second setup $GREETING" > /home/sprite/setup-marker',
    });
    assert.equal(changed.status, 200);
    const mark2 = (await stages(api, conv.id)).at(-1)!.id;
    await park(6);
    assert.match(
      await ask(api, conv.id, 'run: cat setup-marker; printenv GREETING'),
      /second setup hello-again[\s\S]*hello-again/,
    );
    const after2 = await stages(api, conv.id, mark2);
    const reapply = after2.find((s) => s.what === 'provision/started');
    assert.deepEqual(reapply?.data.steps, ['setup'], JSON.stringify(after2));
    assert.equal(reapply?.data.event, 'reapply');
    const ran = after2.map((s) => s.what).filter((w) => /^(skills|packages|clone|setup)\//.test(w));
    assert.deepEqual(ran, ['setup/started', 'setup/done']);
    assert.equal(after2.find((s) => s.what === 'setup/done')?.data.reapply, true);
    assert.match(await ask(api, conv.id, 'run: cat app/README.md'), /version one/, 'the clone was kept');
  });

  it('a failure at each step fails provisioning, names the step and destroys the sandbox', async () => {
    const failing = async (label: string, envBody: Json, agentExtra: Json = {}) => {
      const f = await failProvision(
        tracked,
        label,
        { ...baseEnvironment(), ...envBody },
        (name) => !existsSync(join(sandboxes(), name)),
        agentExtra,
      );
      errors.push(f.failed.data.reason, f.turnReason);
      return f;
    };

    const skills = await failing('skills', {}, { skills: [{ source: 'acme/missing' }] });
    assert.equal(skills.failed.data.step, 'skills');
    assert.match(skills.failed.data.reason, /acme\/missing/);

    const pkgs = await failing('packages', { packages: { npm: [join(tmp, 'no-such-package.tgz')] } });
    assert.equal(pkgs.failed.data.step, 'packages');
    assert.match(pkgs.failed.data.reason, /npm install -g .*no-such-package\.tgz exited \d+/);

    // apt with a configuration of no sources (APT_CONFIG): the real apt-get runs offline and cannot find the name.
    const aptConf = join(tmp, 'apt.conf');
    writeFileSync(
      aptConf,
      `Dir::Etc::SourceList "${join(tmp, 'empty.list')}";\nDir::Etc::SourceParts "${join(tmp, 'no-parts')}";\nDir::State::Lists "${join(tmp, 'apt-lists')}";\nDir::Cache "${join(tmp, 'apt-cache')}";\n`,
    );
    writeFileSync(join(tmp, 'empty.list'), '');
    execFileSync('mkdir', [
      '-p',
      join(tmp, 'no-parts'),
      join(tmp, 'apt-lists', 'partial'),
      join(tmp, 'apt-cache', 'archives', 'partial'),
    ]);
    const apt = await failing('apt', {
      packages: { apt: ['fountain-no-such-package'] },
      env_vars: { APT_CONFIG: aptConf, GIT_SSL_CAINFO: git.caFile },
    });
    assert.equal(apt.failed.data.step, 'packages');
    assert.match(
      apt.failed.data.reason,
      /apt-get install fountain-no-such-package exited 100: .*Unable to locate package fountain-no-such-package/s,
    );
    assert.match(
      JSON.stringify(apt.all.find((s) => s.what === 'packages/started')?.data.commands),
      /apt-get update -qq && \$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq 'fountain-no-such-package'/,
    );

    const clone = await failing('clone', { secrets: { API_TOKEN: ENV_SECRET, CLONE_TOKEN: `${CLONE_TOKEN}-wrong` } });
    assert.equal(clone.failed.data.step, 'clone');
    assert.match(
      clone.failed.data.reason,
      /cloning https:\/\/localhost:\d+\/private\/app\.git into \/home\/sprite\/app exited 128/,
    );

    const setup = await failing('setup', { setup_script: 'echo "about to fail"; exit 7' });
    assert.equal(setup.failed.data.step, 'setup');
    assert.match(setup.failed.data.reason, /setup script exited 7: about to fail/);
    assert.equal(setup.all.find((s) => s.what === 'setup/failed')?.data.exit_code, 7);

    // A ${VAR} nothing defines fails before any sandbox exists, naming the variable.
    const e = await tracked('POST', '/api/environments', { name: 'mcp-missing' });
    const a = await tracked('POST', '/api/agents', {
      name: 'mcp-missing',
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: e.body.data.id,
      mcp_servers: { x: { command: 'srv', env: { T: '${NOT_DEFINED}' } } },
    });
    const c = await tracked('POST', '/api/conversations', { agent_id: a.body.data.id });
    const f = await waitStage(api, c.body.data.id, 'provision/failed');
    assert.equal(f.data.step, 'configuration');
    assert.match(f.data.reason, /MCP server x env T uses \$\{NOT_DEFINED\}/);
    assert.ok(!existsSync(join(sandboxes(), c.body.data.sandbox.name)), 'no sandbox was created');

    // A limited network on a backend without network_policy is refused before any sandbox.
    const lim = await tracked('POST', '/api/environments', {
      name: 'limited',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['localhost'] },
    });
    const la = await tracked('POST', '/api/agents', {
      name: 'limited',
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: lim.body.data.id,
    });
    const lc = await tracked('POST', '/api/conversations', { agent_id: la.body.data.id });
    assert.deepEqual(
      [lc.status, lc.body.error, lc.body.provider],
      [422, 'backend_lacks_network_policy', 'runner'],
      JSON.stringify(lc.body),
    );
    assert.match(lc.body.message, /environment limited limits the network/);
    const net = await waitStage(api, lc.body.conversation_id, 'network/failed');
    assert.deepEqual([net.data.type, net.data.reason], ['limited', 'backend_lacks_network_policy']);
  });

  it('a conversation may pick another environment only within allowed_environment_ids', async () => {
    const own = await tracked('POST', '/api/environments', { name: 'own', env_vars: { GREETING: 'from-own' } });
    const other = await tracked('POST', '/api/environments', { name: 'other', env_vars: { GREETING: 'from-other' } });
    const picker = await tracked('POST', '/api/agents', {
      name: 'picker',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { default: 'auto_allow' },
      environment_id: own.body.data.id,
      allowed_environment_ids: [],
    });
    assert.equal(picker.status, 201, JSON.stringify(picker.body));
    const agentId = picker.body.data.id as string;
    const refused = await tracked('POST', '/api/conversations', {
      agent_id: agentId,
      environment_id: other.body.data.id,
    });
    assert.deepEqual([refused.status, refused.body.error], [422, 'environment_not_allowed']);
    assert.equal(
      (await tracked('PATCH', `/api/agents/${agentId}`, { allowed_environment_ids: [other.body.data.id] })).status,
      200,
    );
    const c = await tracked('POST', '/api/conversations', { agent_id: agentId, environment_id: other.body.data.id });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    assert.equal(c.body.data.environment_id, other.body.data.id);
    await waitStage(api, c.body.data.id, 'provision/done');
    assert.match(await ask(api, c.body.data.id, 'run: printenv GREETING'), /from-other/);
    const unknown = await tracked('POST', '/api/conversations', {
      agent_id: agentId,
      environment_id: '00000000-0000-0000-0000-000000000000',
    });
    assert.deepEqual([unknown.status, unknown.body.error], [404, 'environment_not_found']);
  });

  it('no log line, event, error or reply of the whole run holds a secret or the clone token', async () => {
    const convs = (await api('GET', '/api/conversations')).body.data as Json[];
    const events: string[] = [];
    for (const c of convs) events.push(JSON.stringify(await allEvents(api, c.id)), JSON.stringify(c));
    assert.ok(logLines.length > 0 && runner.stderr().length > 0, 'logs were captured');
    const found = leaks(
      {
        'server log': logLines.join(''),
        'runner log': runner.stderr(),
        events: events.join('\n'),
        errors: errors.join('\n'),
        replies: replies.join('\n'),
      },
      SECRETS,
    );
    assert.deepEqual(found, []);
  });
});
