/**
 * Agent environments on the namespace backend (issue 17), where `limited` is enforced: the policy is
 * applied through the runner, the agent sees the variable, the secret, an npm package and the setup
 * script's work, a private repository on an allowed host is cloned over https with its token (through
 * the egress proxy), and a repository on a host the policy does not allow fails the clone step in words.
 * Needs root and bubblewrap (skipped otherwise, with the reason).
 *
 * The git server cannot be on loopback (the proxy never dials the host's loopback), so it gets an
 * address of its own on a veth link of this host, port 443, and a name: a small DNS server on that
 * address answers it, and the runner daemon runs in a private mount namespace whose /etc/resolv.conf
 * points there (the sandboxes keep their own resolver, which answers only the policy's names).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import type { Socket as UdpSocket } from 'node:dgram';
import { chmodSync, copyFileSync, mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startResolver } from '../src/runner/backends/namespace/dns.ts';
import { namespaceSupportProblem } from '../src/runner/backends/namespace/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { allEvents, apiFor, ask, leaks, npmTarball, stages, waitStage } from './helpers/environments.ts';
import { startGitHttpsServer, type GitHttpsServer } from './helpers/git-https.ts';
import type { Json } from './helpers/http.ts';
import { agentProcessesOf } from './helpers/processes.ts';

const nsProblem = namespaceSupportProblem();
/** Keeps this file's namespace links apart from other runs on the machine. */
const octet = 20 + ((process.pid + 71) % 200);
/** The git server's own host-local address and name (198.18/15 is set aside for tests, RFC 2544). */
const GIT_ADDR = `198.18.${octet}.1`;
const GIT_NAME = `git-${octet}.fountain.test`;
const LINK = `fgit${octet}`;
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

describe('environments on a namespace runner', { skip: nsProblem ?? false }, () => {
  const SECRET = `ns-secret-${randomBytes(12).toString('hex')}`;
  const CLONE_TOKEN = `ns-clone-${randomBytes(12).toString('hex')}`;
  const schema = uniqueSchemaName();
  let tmp: string;
  let shared: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let git: GitHttpsServer;
  let dns: UdpSocket | undefined;
  let linked = false;
  const api = apiFor(
    () => srv.url,
    () => key,
  );

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-envs-ns-')));
    // Sandboxes get a private /tmp and run as their own uid: the package lives where they can read it.
    shared = mkdtempSync('/var/tmp/fountain-envs-ns-');
    chmodSync(shared, 0o755);
    try {
      ip('link', 'del', `${LINK}a`); // left by a run that died before its cleanup
    } catch {}
    ip('link', 'add', `${LINK}a`, 'type', 'veth', 'peer', 'name', `${LINK}b`);
    linked = true;
    ip('addr', 'add', `${GIT_ADDR}/32`, 'dev', `${LINK}a`);
    ip('link', 'set', `${LINK}a`, 'up');
    ip('link', 'set', `${LINK}b`, 'up');
    dns = await startResolver(
      GIT_ADDR,
      53,
      (n) => (n === GIT_NAME ? { kind: 'address', ipv4: GIT_ADDR, ttl: 5 } : { kind: 'nxdomain' }),
      () => {},
    );
    git = await startGitHttpsServer(join(tmp, 'git'), CLONE_TOKEN, { address: GIT_ADDR, name: GIT_NAME, port: 443 });
    git.addRepo('private/app', { 'README.md': 'the app in a namespace\n' });
    // The sandbox uid reads the test CA from the shared directory.
    copyFileSync(git.caFile, join(shared, 'ca.pem'));
    chmodSync(join(shared, 'ca.pem'), 0o644);
    const resolvConf = join(tmp, 'resolv.conf');
    writeFileSync(resolvConf, `nameserver ${GIT_ADDR}\noptions attempts:2 timeout:2\n`);
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({
      name: 'ns',
      root: join(tmp, 'sandboxes'),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
      extraArgs: ['--backend', 'namespace', '--ns-subnet', `10.61.${octet}.0/24`],
      // The daemon's host-side lookups (the proxy's) see the test's resolver; nothing else on the machine does.
      wrap: [
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount --bind "$0" /etc/resolv.conf && exec "$@"',
        resolvConf,
      ],
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
    dns?.close();
    if (linked) ip('link', 'del', `${LINK}a`);
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
    const agent = await api('POST', '/api/agents', {
      name: 'ns-builder',
      permission_policy: { default: 'auto_allow' },
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: env.body.data.id,
    });
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await waitStage(api, id, 'provision/done');
    const seen = await stages(api, id);
    assert.deepEqual(
      seen.map((s) => s.what).filter((w) => !w.startsWith('provision/')),
      ['packages/started', 'packages/done', 'network/started', 'network/done', 'setup/started', 'setup/done'],
    );
    assert.deepEqual(seen.find((s) => s.what === 'network/done')?.data, {
      type: 'limited',
      hosts: ['registry.npmjs.org'],
    });
    assert.match(await ask(api, id, 'run: printenv GREETING'), /hello-ns/);
    assert.match(
      await ask(api, id, 'run: printf %s "$API_TOKEN" | sha256sum'),
      new RegExp(createHash('sha256').update(SECRET).digest('hex')),
    );
    assert.match(await ask(api, id, 'run: fountain-ns-hello'), /hello from npm in a namespace/);
    assert.match(await ask(api, id, 'run: cat /home/sprite/setup-marker'), /setup in ns: hello-ns/);
    // The agent works and keeps its HOME in the sandbox directory the API reports (bound at /home/sprite
    // inside), not in the namespace's private /tmp: its cwd is that very directory, seen from the host.
    const where = statSync(created.body.data.sandbox.runner.path as string);
    // bubblewrap itself starts on the host; what it runs is the agent.
    const procs = agentProcessesOf(id).filter((p) => !/^\S*bwrap /.test(p.argv));
    assert.ok(procs.length > 0, 'the agent process was found by its conversation id');
    for (const p of procs) {
      const cwd = statSync(`/proc/${p.pid}/cwd`);
      assert.deepEqual([cwd.dev, cwd.ino], [where.dev, where.ino], `${p.argv} works in the sandbox directory`);
      assert.equal(p.cwd, '/home/sprite', 'the name the sandbox directory has inside');
      // HOME as seen inside, where /home/sprite is the sandbox directory.
      assert.equal(p.home, '/home/sprite');
    }
    assert.deepEqual(
      leaks({ events: JSON.stringify(await allEvents(api, id)), 'runner log': runner.stderr() }, [SECRET]),
      [],
    );
  });

  it('clones a private repository over https from an allowed host with its token, which no file, event or log holds', async () => {
    const env = await api('POST', '/api/environments', {
      name: 'ns-clone',
      env_vars: { GIT_SSL_CAINFO: join(shared, 'ca.pem') },
      secrets: { CLONE_TOKEN },
      networking_type: 'limited',
      networking_config: { allowed_hosts: [GIT_NAME] },
      repositories: [{ url: `${git.url}/private/app.git`, mount_path: 'app', secret_key: 'CLONE_TOKEN' }],
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await api('POST', '/api/agents', {
      name: 'ns-cloner',
      permission_policy: { default: 'auto_allow' },
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: env.body.data.id,
    });
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await waitStage(api, id, 'provision/done');
    const seen = await stages(api, id);
    assert.deepEqual(
      seen.map((s) => s.what).filter((w) => !w.startsWith('provision/')),
      ['network/started', 'network/done', 'clone/started', 'clone/done'],
    );
    assert.match(await ask(api, id, 'run: cat /home/sprite/app/README.md'), /the app in a namespace/);
    assert.ok(
      git.requests.some((r) => r.path.startsWith('/private/') && r.authorized),
      'the clone carried the token',
    );
    const cloneFiles = await ask(api, id, 'run: cat /home/sprite/app/.git/config; ls -a /home/sprite');
    assert.deepEqual(
      leaks(
        { 'clone files': cloneFiles, events: JSON.stringify(await allEvents(api, id)), 'runner log': runner.stderr() },
        [CLONE_TOKEN],
      ),
      [],
    );
  });

  it('a repository on a host the limited network does not allow fails the clone step, naming the host', async () => {
    const env = await api('POST', '/api/environments', {
      name: 'ns-closed',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['registry.npmjs.org'] },
      repositories: [{ url: 'https://git.example.test/org/app.git' }],
    });
    const agent = await api('POST', '/api/agents', {
      name: 'ns-closed',
      permission_policy: { default: 'auto_allow' },
      runtime: 'demo',
      model: 'fountain/demo',
      environment_id: env.body.data.id,
    });
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    const failed = await waitStage(api, created.body.data.id, 'provision/failed');
    assert.equal(failed.data.step, 'clone');
    assert.match(
      failed.data.reason,
      /limited and does not allow git\.example\.test: add it to networking_config\.allowed_hosts/,
    );
    assert.equal((await api('GET', `/api/conversations/${created.body.data.id}`)).body.data.status, 'failed');
  });
});
