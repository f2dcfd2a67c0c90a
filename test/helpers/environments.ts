/**
 * What the environment end-to-end tests share: a local npm package tarball, the conversation calls
 * (create, prompt, wait for a stage, read every event) over the public API, a search of every output
 * for secret values, a provisioning made to fail, and the suite each vendor stub runs. Tests only.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import type { SandboxAdapter } from '../../src/sandbox/index.ts';
import { until } from '../../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../../src/server/store/testing.ts';
import { startGitHttpsServer, type GitHttpsServer } from './git-https.ts';
import { answerOf, call, type Json } from './http.ts';

/** `npm pack` of a one-file package whose bin prints a greeting; returns the tarball's path. */
export async function npmTarball(dir: string, name: string, greeting: string): Promise<string> {
  const pkg = join(dir, name);
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name, version: '1.0.0', bin: { [name]: 'cli.js' } }));
  writeFileSync(join(pkg, 'cli.js'), `#!/usr/bin/env node\nconsole.log(${JSON.stringify(greeting)});\n`, {
    mode: 0o755,
  });
  const { stdout } = await promisify(execFile)('npm', ['pack', '--silent', '--pack-destination', dir], {
    cwd: pkg,
    env: { ...process.env, npm_config_cache: join(dir, '.npm-cache') },
  });
  return join(dir, stdout.trim().split('\n').pop()!);
}

export interface Api {
  (method: string, path: string, body?: unknown): ReturnType<typeof call>;
}

export const apiFor =
  (base: () => string, key: () => string): Api =>
  (method, path, body) =>
    call(base(), key(), method, path, body);

/** Every stored event of a conversation, oldest first. */
export async function allEvents(api: Api, conversationId: string): Promise<Json[]> {
  const out: Json[] = [];
  for (let after = 0; ; ) {
    const page = await api('GET', `/api/conversations/${conversationId}/events?after=${after}&limit=1000`);
    const data = page.body.data as Json[];
    out.push(...data);
    if (data.length < 1000) return out;
    after = data[data.length - 1].id;
  }
}

/** Stage events as `stage/state` strings with their parsed data. */
export async function stages(
  api: Api,
  conversationId: string,
  afterId = 0,
): Promise<Array<{ id: number; what: string; data: Json }>> {
  return (await allEvents(api, conversationId))
    .filter((e) => e.kind === 'stage' && e.id > afterId)
    .map((e) => ({ id: e.id, what: `${e.stage}/${e.state}`, data: JSON.parse(e.data || '{}') }));
}

export async function waitStage(
  api: Api,
  conversationId: string,
  what: string,
  afterId = 0,
  timeoutMs = 120_000,
): Promise<{ id: number; what: string; data: Json }> {
  return until(
    async () => {
      const all = await stages(api, conversationId, afterId);
      const failed = what === 'provision/done' ? all.find((s) => s.what === 'provision/failed') : undefined;
      if (failed) throw new Error(`provisioning failed instead: ${JSON.stringify(failed.data)}`);
      return all.find((s) => s.what === what);
    },
    `${what} of ${conversationId}`,
    timeoutMs,
  );
}

/** Sends a prompt and returns the agent's answer once the turn ended. */
export async function ask(api: Api, conversationId: string, prompt: string): Promise<string> {
  const r = await api('POST', `/api/conversations/${conversationId}/prompts`, { prompt });
  if (r.status !== 200) throw new Error(`prompt refused: ${r.status} ${JSON.stringify(r.body)}`);
  const turnId = r.body.turn_id as string;
  const turn = await until(async () => {
    const turns = (await api('GET', `/api/conversations/${conversationId}/turns`)).body.data as Json[];
    const t = turns.find((x) => x.id === turnId);
    return t && ['completed', 'failed', 'interrupted'].includes(t.status) ? t : null;
  }, `turn ${turnId} to end`);
  const events = await allEvents(api, conversationId);
  if (turn.status !== 'completed') {
    const said = events
      .filter((e) => e.turn_id === turnId && e.kind === 'stage')
      .map((e) => `${e.stage}/${e.state} ${e.data}`);
    throw new Error(`turn for ${JSON.stringify(prompt)} ended ${turn.status}: ${said.join(' | ')}`);
  }
  return answerOf(events, turnId);
}

/** The places in `haystacks` where any of `needles` occurs, named by their label. */
export function leaks(haystacks: Readonly<Record<string, string>>, needles: readonly string[]): string[] {
  const found: string[] = [];
  for (const [label, text] of Object.entries(haystacks))
    for (const n of needles) if (text.includes(n)) found.push(`${label} holds ${n.slice(0, 4)}…`);
  return found;
}

/** A stage event as `stages` returns it. */
export type Stage = Awaited<ReturnType<typeof stages>>[number];

export interface FailedProvision {
  /** The `provision/failed` stage. */
  readonly failed: Stage;
  /** Every stage of the conversation. */
  readonly all: Stage[];
  /** The failed turn's reason. */
  readonly turnReason: string;
  readonly sandboxName: string;
}

/**
 * Creates an environment from `envBody`, a demo agent using it (plus `agentExtra`) and a conversation
 * with a first prompt; waits for provisioning to fail, for the conversation, its sandbox and its turn to
 * read failed, and for `gone(sandbox name)` to hold (the backend no longer has the sandbox).
 */
export async function failProvision(
  api: Api,
  label: string,
  envBody: Json,
  gone: (sandboxName: string) => boolean | Promise<boolean>,
  agentExtra: Json = {},
): Promise<FailedProvision> {
  const e = await api('POST', '/api/environments', { ...envBody, name: `fail-${label}` });
  if (e.status !== 201) throw new Error(`environment ${label}: ${e.status} ${JSON.stringify(e.body)}`);
  const a = await api('POST', '/api/agents', {
    runtime: 'demo',
    model: 'fountain/demo',
    ...agentExtra,
    name: `fail-${label}`,
    environment_id: e.body.data.id,
  });
  if (a.status !== 201) throw new Error(`agent ${label}: ${a.status} ${JSON.stringify(a.body)}`);
  const c = await api('POST', '/api/conversations', { agent_id: a.body.data.id, prompt: 'hello' });
  if (c.status !== 201) throw new Error(`conversation ${label}: ${c.status} ${JSON.stringify(c.body)}`);
  const id = c.body.data.id as string;
  const failed = await waitStage(api, id, 'provision/failed');
  // The stage event is stored first; the conversation, its sandbox and its turn are marked after it.
  const row = await until(
    async () => {
      const r = await api('GET', `/api/conversations/${id}`);
      return r.body.data.status === 'failed' && r.body.data.sandbox.status === 'failed' ? r.body.data : null;
    },
    `conversation of ${label} failed`,
    30_000,
  );
  const sandboxName = row.sandbox.name as string;
  await until(
    async () => ((await gone(sandboxName)) ? true : null),
    `sandbox ${sandboxName} of ${label} destroyed`,
    30_000,
  );
  const turn = await until(
    async () => {
      const r = await api('GET', `/api/conversations/${id}/turns`);
      return r.body.data[0]?.status === 'failed' ? (r.body.data[0] as Json) : null;
    },
    `turn of ${label} failed`,
    30_000,
  );
  return { failed, all: await stages(api, id), turnReason: turn.reason ?? '', sandboxName };
}

/** What the vendor end-to-end suite needs from one vendor's loopback stub and its adapter. */
export interface VendorStub {
  readonly adapter: SandboxAdapter;
  /** The server's env naming the provider and its credential. */
  readonly env: Readonly<Record<string, string>>;
  /** Whether the vendor still holds a sandbox of this name. */
  holds(name: string): boolean;
  /** The egress allow-list the vendor holds for the sandbox, in the vendor's own shape. */
  allowList(name: string): unknown;
  /** What `allowList` reads for an environment allowing `localhost` and `registry.npmjs.org`. */
  readonly expectedAllowList: unknown;
  /** Runs `fn` while the vendor refuses network-policy calls as it does in real life. */
  refusingPolicy<T>(fn: () => Promise<T>): Promise<T>;
  /** Every request the stub saw except those that start a process (which carry the env by design), as text. */
  requestsBesidesProcessStarts(): string;
  stop(): Promise<void>;
}

/**
 * The environments suite every vendor stub runs (issue 17): a `limited` environment with a variable, a
 * secret, an npm package from a local tarball, a repository cloned over https from a local git server
 * and a setup script, seen by the demo agent, with no secret in an event, a log line, a stub request
 * other than a process start, or a process listing; then a failure at each step (packages, network,
 * clone, setup) fails provisioning naming the step, and the vendor no longer holds the sandbox.
 */
export function describeVendorEnvironments(
  provider: 'e2b' | 'daytona' | 'sprites',
  startStub: () => Promise<VendorStub>,
): void {
  describe(`environments on the ${provider} provider against its stub`, () => {
    const SECRET = `${provider}-secret-${randomBytes(12).toString('hex')}`;
    const CLONE_TOKEN = `${provider}-clone-${randomBytes(12).toString('hex')}`;
    const HOSTS = ['localhost', 'registry.npmjs.org'];
    const schema = uniqueSchemaName();
    const logLines: string[] = [];
    const psSeen: string[] = [];
    let tmp: string;
    let vendor: VendorStub;
    let git: GitHttpsServer;
    let tarball: string;
    let srv: RunningServer;
    let key: string;
    const api = apiFor(
      () => srv.url,
      () => key,
    );
    const bin = `fountain-${provider}-hello`;

    const environment = (): Json => ({
      name: `${provider}-project`,
      // Stub sandboxes have no image: the image's npm prefix (images/<provider>) is given as a variable.
      env_vars: {
        GREETING: `hello-${provider}`,
        GIT_SSL_CAINFO: git.caFile,
        npm_config_prefix: '/home/sprite/.npm-global',
      },
      secrets: { API_TOKEN: SECRET, CLONE_TOKEN },
      packages: { npm: [tarball] },
      networking_type: 'limited',
      networking_config: { allowed_hosts: HOSTS },
      repositories: [{ url: `${git.url}/private/service.git`, secret_key: 'CLONE_TOKEN' }],
      setup_script: `echo "setup on ${provider}: $GREETING" > /home/sprite/setup-marker`,
    });

    before(async () => {
      tmp = realpathSync(mkdtempSync(join(tmpdir(), `fountain-envs-${provider}-`)));
      git = await startGitHttpsServer(join(tmp, 'git'), CLONE_TOKEN);
      git.addRepo('private/service', { 'README.md': 'the service\n' });
      tarball = await npmTarball(join(tmp, 'npm'), bin, `hello from npm on ${provider}`);
      vendor = await startStub();
      srv = await startServer({
        dataDir: join(tmp, 'data'),
        port: 0,
        env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, SANDBOX_PROVIDER: provider, ...vendor.env },
        databaseSchema: schema,
        adapters: [vendor.adapter],
        logger: pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) }),
        engine: { idleTimeoutMs: 60 * 60_000, sweepIntervalMs: 3_600_000 },
      });
      key = srv.bootstrapKey!;
    });

    after(async () => {
      await srv?.stop();
      await vendor?.stop();
      await git?.close();
      await dropSchema(schema);
      rmSync(tmp, { recursive: true, force: true });
    });

    it('provisions a limited environment; the agent sees each part; no secret leaks', async () => {
      const env = await api('POST', '/api/environments', environment());
      assert.equal(env.status, 201, JSON.stringify(env.body));
      const agent = await api('POST', '/api/agents', {
        name: `${provider}-builder`,
        permission_policy: { default: 'auto_allow' },
        runtime: 'demo',
        model: 'fountain/demo',
        sandbox_provider: provider,
        environment_id: env.body.data.id,
      });
      assert.equal(agent.status, 201, JSON.stringify(agent.body));
      const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.data.id as string;
      const sandboxName = created.body.data.sandbox.name as string;
      await waitStage(api, id, 'provision/done');
      const seen = await stages(api, id);
      assert.deepEqual(
        seen.map((s) => s.what).filter((w) => !/^(provision|sandbox)\//.test(w)),
        [
          'packages/started',
          'packages/done',
          'network/started',
          'network/done',
          'clone/started',
          'clone/done',
          'setup/started',
          'setup/done',
        ],
      );
      assert.deepEqual(seen.find((s) => s.what === 'network/done')?.data, { type: 'limited', hosts: HOSTS });
      assert.deepEqual(vendor.allowList(sandboxName), vendor.expectedAllowList, `the policy reached ${provider}`);

      assert.match(await ask(api, id, 'run: printenv GREETING'), new RegExp(`hello-${provider}`));
      assert.match(
        await ask(api, id, 'run: printf %s "$API_TOKEN" | sha256sum'),
        new RegExp(createHash('sha256').update(SECRET).digest('hex')),
      );
      assert.match(
        await ask(api, id, `run: /home/sprite/.npm-global/bin/${bin}`),
        new RegExp(`hello from npm on ${provider}`),
      );
      assert.match(
        await ask(api, id, 'run: cat /home/sprite/service/README.md /home/sprite/setup-marker'),
        new RegExp(`the service[\\s\\S]*setup on ${provider}: hello-${provider}`),
      );
      assert.doesNotMatch(
        await ask(api, id, 'run: cat /home/sprite/.env /home/sprite/service/.git/config'),
        new RegExp(`${provider}-(secret|clone)`),
      );
      assert.ok(
        git.requests.some((r) => r.path.startsWith('/private/') && r.authorized),
        'the clone carried the token',
      );
      // The agent is running: its process (and any wrapper around it) must not hold a secret in its argv.
      psSeen.push(execFileSync('ps', ['-eww', '-o', 'args'], { encoding: 'utf8' }));

      const events = JSON.stringify(await allEvents(api, id));
      assert.deepEqual(
        leaks(
          {
            events,
            'server log': logLines.join(''),
            [`${provider} calls other than process starts`]: vendor.requestsBesidesProcessStarts(),
            'process listing': psSeen.join('\n'),
          },
          [SECRET, CLONE_TOKEN],
        ),
        [],
      );
    });

    it('limited → unrestricted: the next launch says the applied policy stays (the contract can only narrow egress)', async () => {
      const env = await api('POST', '/api/environments', {
        name: `${provider}-narrowed`,
        networking_type: 'limited',
        networking_config: { allowed_hosts: HOSTS },
      });
      assert.equal(env.status, 201, JSON.stringify(env.body));
      const agent = await api('POST', '/api/agents', {
        name: `${provider}-narrowed`,
        permission_policy: { default: 'auto_allow' },
        runtime: 'demo',
        model: 'fountain/demo',
        environment_id: env.body.data.id,
      });
      const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const id = created.body.data.id as string;
      const sandboxName = created.body.data.sandbox.name as string;
      await waitStage(api, id, 'provision/done');
      assert.deepEqual(vendor.allowList(sandboxName), vendor.expectedAllowList);
      // The sweep parks only an idle conversation.
      await until(async () => {
        await srv.engine.sweep(new Date(Date.now() + 3 * 3_600_000));
        return (await api('GET', `/api/conversations/${id}`)).body.data.sandbox.status === 'suspended';
      }, 'the sandbox to park');
      assert.equal(
        (await api('PATCH', `/api/environments/${env.body.data.id}`, { networking_type: 'unrestricted' })).status,
        200,
      );
      const mark = (await stages(api, id)).at(-1)!.id;
      assert.match(await ask(api, id, 'run: echo awake'), /awake/);
      const woke = await stages(api, id, mark);
      assert.deepEqual(woke.find((s) => s.what === 'provision/started')?.data.steps, ['network'], JSON.stringify(woke));
      const net = woke.find((s) => s.what === 'network/done');
      assert.equal(net?.data.type, 'unrestricted', JSON.stringify(woke));
      assert.equal(net?.data.lifted, false);
      assert.match(net?.data.reason ?? '', /stays applied until the conversation gets a new sandbox/);
      assert.deepEqual(vendor.allowList(sandboxName), vendor.expectedAllowList, 'nothing pretended to lift it');
    });

    it('a failure at packages, network, clone or setup fails provisioning, names the step and destroys the sandbox', async () => {
      const gone = (name: string) => !vendor.holds(name);
      const reasons: string[] = [];
      const expect = async (label: string, body: Json, step: string, reason: RegExp, run = failProvision) => {
        const f = await run(api, label, { ...environment(), ...body }, gone);
        assert.equal(f.failed.data.step, step, JSON.stringify(f.failed.data));
        assert.match(f.failed.data.reason, reason);
        assert.equal(
          f.all.find((s) => s.what === `${step}/failed`)?.what,
          `${step}/failed`,
          'the step itself says it failed',
        );
        assert.match(f.turnReason, new RegExp(`provisioning failed: ${step}: `));
        reasons.push(JSON.stringify(f));
        return f;
      };
      await expect(
        'packages',
        { packages: { npm: [join(tmp, 'no-such-package.tgz')] } },
        'packages',
        /npm install -g .*no-such-package\.tgz exited \d+/,
      );
      await vendor.refusingPolicy(() => expect('network', {}, 'network', /applying the network policy failed/));
      await expect(
        'clone',
        { secrets: { API_TOKEN: SECRET, CLONE_TOKEN: `${CLONE_TOKEN}-wrong` } },
        'clone',
        /cloning https:\/\/localhost:\d+\/private\/service\.git into \/home\/sprite\/service exited 128/,
      );
      const setup = await expect(
        'setup',
        { setup_script: 'echo "about to fail"; exit 7' },
        'setup',
        /setup script exited 7: about to fail/,
      );
      assert.equal(setup.all.find((s) => s.what === 'setup/failed')?.data.exit_code, 7);
      assert.deepEqual(
        leaks(
          {
            failures: reasons.join('\n'),
            'server log': logLines.join(''),
            [`${provider} calls other than process starts`]: vendor.requestsBesidesProcessStarts(),
          },
          [SECRET, CLONE_TOKEN],
        ),
        [],
      );
    });
  });
}
