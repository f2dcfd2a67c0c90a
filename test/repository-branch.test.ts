/**
 * Starting where the work is, against a real server, runner (process backend) and a local git server over
 * https: the branches of an environment's repository listed by the server with the environment's token; a
 * conversation started on one (a branch the remote lacks is 422); the demo agent commits there; "push to a
 * branch" sends the commit to a new branch read back on the git server's side; through the API and the CLI.
 * The token shows in no reply, event, or file of the sandbox.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { compareUrl, parseLsRemote } from '../src/server/environments/git-remote.ts';
import { startGitHttpsServer, type GitHttpsServer } from './helpers/git-https.ts';
import { call, type Json } from './helpers/http.ts';
import { FOUNTAIN_BIN, startStack, until, type Stack } from './web/harness.ts';

const T = 90_000;

function fountain(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [FOUNTAIN_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  return new Promise((r) => child.on('exit', (code) => r({ code, out, err })));
}

describe('compare links and ls-remote output', () => {
  it('links a github-like remote, and nothing else', () => {
    assert.equal(
      compareUrl('https://github.com/acme/app.git', 'main', 'fountain/x'),
      'https://github.com/acme/app/compare/main...fountain/x',
    );
    assert.equal(
      compareUrl('https://github.example.com/acme/app', 'dev', 'b'),
      'https://github.example.com/acme/app/compare/dev...b',
    );
    assert.equal(compareUrl('https://localhost:8443/private/app.git', 'main', 'b'), null);
    assert.equal(compareUrl('https://github.com/acme', 'main', 'b'), null);
  });
  it('reads the default branch first, then the others sorted', () => {
    const sha = 'a'.repeat(40);
    const r = parseLsRemote(
      `ref: refs/heads/main\tHEAD\n${sha}\tHEAD\n${sha}\trefs/heads/zeta\n${sha}\trefs/heads/main\n${sha}\trefs/heads/alpha\n`,
    );
    assert.deepEqual(r, { branches: ['main', 'alpha', 'zeta'], defaultBranch: 'main' });
  });
});

describe('repository branch pick and push to a branch', () => {
  const TOKEN = `clone-token-${randomBytes(12).toString('hex')}`;
  let tmp: string;
  let git: GitHttpsServer;
  let stack: Stack;
  let cliEnv: NodeJS.ProcessEnv;
  let envId: string;
  let agentId: string;
  const replies: string[] = [];
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await call(stack.url, stack.apiKey, method, path, body);
    replies.push(JSON.stringify(r.body));
    return r;
  };
  const events = async (id: string): Promise<string> =>
    JSON.stringify((await api('GET', `/api/conversations/${id}/events?limit=1000`)).body.data);
  const turnEnded = async (id: string, n: number): Promise<Json> =>
    until(
      async () => {
        const turns = (await api('GET', `/api/conversations/${id}/turns`)).body.data as Json[];
        const t = turns[n - 1];
        return t && ['completed', 'failed', 'interrupted'].includes(t.status) ? t : null;
      },
      `turn ${n} to end`,
      T,
    );

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fountain-branch-'));
    git = await startGitHttpsServer(join(tmp, 'git'), TOKEN);
    git.addRepo('private/app', { 'README.md': 'the app\n' });
    git.addBranch('private/app', 'feature', { 'FEATURE.md': 'the feature branch\n' });
    // The server's own git (ls-remote) trusts the test CA the way git is told to: the server's environment.
    process.env.GIT_SSL_CAINFO = git.caFile;
    stack = await startStack({ env: { FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex') } });
    await stack.startRunner();
    cliEnv = {
      FOUNTAIN_API_KEY: stack.apiKey,
      FOUNTAIN_BASE_URL: stack.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: mkdtempSync(join(tmpdir(), 'fountain-cli-')),
      FOUNTAIN_LOG_FORMAT: 'json',
    };
    const env = await api('POST', '/api/environments', {
      name: 'project',
      env_vars: { GIT_SSL_CAINFO: git.caFile },
      secrets: { CLONE_TOKEN: TOKEN },
      repositories: [{ url: `${git.url}/private/app.git`, mount_path: 'app', secret_key: 'CLONE_TOKEN' }],
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    envId = env.body.data.id;
    const agent = await api('POST', '/api/agents', {
      name: 'builder',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { default: 'auto_allow' },
      environment_id: envId,
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });

  after(async () => {
    await stack?.stop();
    await git?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('lists the branches with the token, through the API and the CLI', async () => {
    const r = await api('GET', `/api/environments/${envId}/branches`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.data, {
      repository: `${git.url}/private/app.git`,
      default_branch: 'main',
      branches: ['main', 'feature'],
    });
    assert.ok(
      git.requests.some((q) => q.path.includes('info/refs') && q.authorized),
      'ls-remote sent the token',
    );
    const other = await api('GET', `/api/environments/${envId}/branches?repository=https://elsewhere.test/x.git`);
    assert.deepEqual([other.status, other.body.error], [422, 'repository_not_in_environment']);
    const cli = await fountain(['environments', 'branches', 'project'], cliEnv);
    assert.equal(cli.code, 0, cli.err);
    assert.match(cli.out, /^ {2}main \(default\)$/m);
    assert.match(cli.out, /^ {2}feature$/m);
  });

  it('refuses a branch the remote does not have, or that is no branch name', async () => {
    const missing = await api('POST', '/api/conversations', { agent_id: agentId, branch: 'no-such-branch' });
    assert.equal(missing.status, 422, JSON.stringify(missing.body));
    assert.equal(missing.body.error, 'branch_not_found');
    const bad = await api('POST', '/api/conversations', { agent_id: agentId, branch: '--upload-pack=x' });
    assert.equal(bad.status, 422, JSON.stringify(bad.body));
    assert.equal(bad.body.error, 'validation_failed');
    const cli = await fountain(['chat', 'builder', '--branch', 'no-such-branch', '-m', 'hello'], cliEnv);
    assert.notEqual(cli.code, 0);
    assert.match(cli.err + cli.out, /has no branch no-such-branch/);
  });

  it('clones the picked branch; the agent commits; the commit is pushed to a new branch', {
    timeout: 4 * T,
  }, async () => {
    const created = await api('POST', '/api/conversations', {
      agent_id: agentId,
      branch: 'feature',
      prompt: 'run: cd app && git rev-parse --abbrev-ref HEAD && cat FEATURE.md',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    assert.deepEqual(created.body.data.repository_branch, { url: `${git.url}/private/app.git`, branch: 'feature' });
    assert.equal((await turnEnded(id, 1)).status, 'completed');
    assert.match(await events(id), /the feature branch/, 'the sandbox has the feature branch checked out');

    const nothing = await api('POST', `/api/conversations/${id}/push`, { branch: 'fountain/nothing' });
    assert.deepEqual([nothing.status, nothing.body.error], [409, 'nothing_to_push']);

    const sent = await api('POST', `/api/conversations/${id}/prompts`, {
      prompt: 'run: cd app && echo "an agent line" >> FEATURE.md && git commit -qam "agent change" && echo committed',
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    assert.equal((await turnEnded(id, 2)).status, 'completed');

    const cli = await fountain(['conversations', 'push', id, '--branch', 'fountain/from-cli'], cliEnv);
    assert.equal(cli.code, 0, cli.err);
    assert.match(
      cli.out,
      /^pushed 1 commit to branch fountain\/from-cli of https:\/\/localhost:\d+\/private\/app\.git$/m,
    );
    assert.equal(
      git.git('private/app', ['show', 'fountain/from-cli:FEATURE.md']),
      'the feature branch\nan agent line\n',
      'the git server has the agent commit on the new branch',
    );
    assert.match(git.git('private/app', ['log', '-1', '--format=%s', 'fountain/from-cli']), /agent change/);

    const again = await api('POST', `/api/conversations/${id}/push`, { branch: 'fountain/from-cli' });
    assert.deepEqual([again.status, again.body.error], [409, 'branch_exists']);
    const named = await api('POST', `/api/conversations/${id}/push`, {});
    assert.equal(named.status, 201, JSON.stringify(named.body));
    assert.match(named.body.data.branch, /^fountain\/[0-9a-f]{8}-[0-9a-z]+$/);
    assert.equal(named.body.data.base, 'feature');
    assert.equal(named.body.data.compare_url, null, 'not a github-like remote');
    assert.ok(git.git('private/app', ['branch', '--list', named.body.data.branch]).includes(named.body.data.branch));
    assert.ok((await events(id)).includes('"stage":"push"'), 'the push is in the conversation history');

    // The token: given to git for each command only, never kept.
    for (const r of [...replies, await events(id), cli.out, cli.err]) assert.ok(!r.includes(TOKEN), 'the token leaked');
    const dir = (await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.path as string;
    const grep = spawnSync('grep', ['-rl', '--binary-files=text', TOKEN, dir], { encoding: 'utf8' });
    assert.equal(grep.status, 1, `the token is in the sandbox's files: ${grep.stdout}`);
  });
});
