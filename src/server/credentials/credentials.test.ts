/**
 * Model credentials: the secret key file, sealing, the per-runtime delivery, validation against a
 * local provider API, and the write-only HTTP API on a real server.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { Private } from '../../sandbox/private.ts';
import { startServer, type RunningServer } from '../start.ts';
import { startAnthropicApi } from '../../../test/model-apis/anthropic.ts';
import type { ModelApiServer } from '../../../test/model-apis/server.ts';
import { call } from '../../../test/helpers/http.ts';
import { deliveryFor } from './delivery.ts';
import { credentialsFor, missingCredentialMessage } from './providers.ts';
import { open, seal } from './sealing.ts';
import { loadSecretKey, SecretKeyError } from './secret-key.ts';
import { validateCredential } from './validate.ts';

const KEY = 'sk-ant-api03-unit0123456789abcdef';

describe('the secret key and sealing', () => {
  it('generates the key once into the data directory with mode 0600, and reuses it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-secret-'));
    try {
      const a = loadSecretKey({}, dir);
      const file = join(dir, 'secret-key');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.match(readFileSync(file, 'utf8').trim(), /^[0-9a-f]{64}$/);
      assert.deepEqual(loadSecretKey({}, dir).reveal(), a.reveal());
      assert.equal(inspect(a), '[private]');
      const fromEnv = loadSecretKey({ FOUNTAIN_SECRET_KEY: 'ab'.repeat(32) }, dir);
      assert.equal(fromEnv.reveal().toString('hex'), 'ab'.repeat(32));
      assert.throws(() => loadSecretKey({ FOUNTAIN_SECRET_KEY: 'short' }, dir), SecretKeyError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('seals with AES-256-GCM bound to account and provider', () => {
    const k = new Private(Buffer.alloc(32, 7));
    const sealed = seal(k, KEY, 'acct:anthropic_api_key');
    assert.ok(!sealed.includes(KEY) && !Buffer.from(sealed).toString('base64').includes(KEY));
    assert.notEqual(seal(k, KEY, 'acct:anthropic_api_key'), sealed, 'a fresh IV each time');
    assert.equal(open(k, sealed, 'acct:anthropic_api_key'), KEY);
    assert.equal(open(k, sealed, 'other:anthropic_api_key'), null, 'another account cannot open it');
    assert.equal(open(k, sealed, 'acct:openai_api_key'), null, 'another provider cannot open it');
    assert.equal(
      open(new Private(Buffer.alloc(32, 8)), sealed, 'acct:anthropic_api_key'),
      null,
      'another key cannot open it',
    );
    const parts = sealed.split('.');
    parts[3] = Buffer.from('tampered').toString('base64');
    assert.equal(open(k, parts.join('.'), 'acct:anthropic_api_key'), null, 'an altered value does not open');
  });
});

describe('delivery per runtime', () => {
  const cred = (
    provider: Parameters<typeof deliveryFor>[2] extends infer C ? (C extends { provider: infer P } ? P : never) : never,
    baseUrl: string | null = null,
  ) => ({ provider, value: new Private(KEY), baseUrl });

  it('claude prefers the OAuth token; the model and base URL go into its env; the key only into secretEnv', () => {
    assert.deepEqual(credentialsFor('claude', 'anthropic/claude-sonnet-4-5'), [
      'claude_code_oauth_token',
      'anthropic_api_key',
    ]);
    const d = deliveryFor('claude', 'anthropic/claude-sonnet-4-5', cred('anthropic_api_key', 'http://gw.local/'));
    assert.deepEqual(
      d.secretEnv.map(([k, v]) => [k, v.reveal()]),
      [['ANTHROPIC_API_KEY', KEY]],
    );
    assert.deepEqual(d.env, [
      ['ANTHROPIC_BASE_URL', 'http://gw.local'],
      ['ANTHROPIC_MODEL', 'claude-sonnet-4-5'],
    ]);
    const oauth = deliveryFor('claude', 'anthropic/claude-sonnet-4-5', cred('claude_code_oauth_token'));
    assert.deepEqual(
      oauth.secretEnv.map(([k]) => k),
      ['CLAUDE_CODE_OAUTH_TOKEN'],
    );
  });

  it('codex gets its gateway as a config.toml model provider reading OPENAI_API_KEY', () => {
    const d = deliveryFor('codex', 'openai/gpt-5', cred('openai_api_key', 'http://gw.local/v1'));
    const toml = d.files.find((f) => f.path === '.codex/config.toml')!.content;
    assert.match(toml, /^model = "gpt-5"$/m);
    assert.match(toml, /base_url = "http:\/\/gw.local\/v1"/);
    assert.match(toml, /env_key = "OPENAI_API_KEY"/);
    // Codex's shell snapshots dump the process env (the key with it) to <CODEX_HOME>/shell_snapshots/*.sh.
    assert.match(toml, /^\[features\]\nshell_snapshot = false$/m);
    assert.match(
      deliveryFor('codex', 'openai/gpt-5', cred('openai_api_key')).files[0]!.content,
      /shell_snapshot = false/,
    );
    assert.deepEqual(
      d.secretEnv.map(([k]) => k),
      ['OPENAI_API_KEY'],
    );
  });

  it('gemini gets GOOGLE_GEMINI_BASE_URL and GEMINI_MODEL; opencode picks the key by model prefix and asks for bash', () => {
    const g = deliveryFor('gemini', 'google/gemini-2.5-flash', cred('gemini_api_key', 'http://gw.local'));
    assert.deepEqual(g.env, [
      ['GOOGLE_GEMINI_BASE_URL', 'http://gw.local'],
      ['GEMINI_MODEL', 'gemini-2.5-flash'],
    ]);
    assert.deepEqual(credentialsFor('opencode', 'google/gemini-2.5-pro'), ['gemini_api_key']);
    assert.deepEqual(credentialsFor('opencode', 'anthropic/claude-sonnet-4-5'), ['anthropic_api_key']);
    const o = deliveryFor('opencode', 'openai/gpt-5', cred('openai_api_key', 'http://gw.local/v1'));
    const config = JSON.parse(o.files[0]!.content);
    assert.equal(config.model, 'openai-gateway/gpt-5');
    assert.equal(config.provider['openai-gateway'].options.apiKey, '{env:OPENAI_API_KEY}');
    assert.deepEqual(config.provider['openai-gateway'].models['gpt-5'].modalities.input, ['text', 'image']);
    assert.equal(config.permission.bash, 'ask');
  });

  it('no file and no plain env value ever holds the credential', () => {
    for (const [runtime, model, provider] of [
      ['claude', 'anthropic/claude-sonnet-4-5', 'anthropic_api_key'],
      ['codex', 'openai/gpt-5', 'openai_api_key'],
      ['gemini', 'google/gemini-2.5-flash', 'gemini_api_key'],
      ['opencode', 'anthropic/claude-sonnet-4-5', 'anthropic_api_key'],
    ] as const) {
      const d = deliveryFor(runtime, model, cred(provider, 'http://gw.local'));
      assert.ok(!JSON.stringify([d.env, d.files]).includes(KEY), runtime);
      assert.ok(!inspect(d, { depth: 10 }).includes(KEY), runtime);
    }
  });

  it('a missing credential names the page and the command', () => {
    const m = missingCredentialMessage('codex', 'openai/gpt-5', ['openai_api_key']);
    assert.match(m, /\/account\/credentials/);
    assert.match(m, /fountain credentials set openai_api_key/);
  });
});

describe('validation against the provider', () => {
  let api: ModelApiServer;
  let silent: Server;
  let silentUrl: string;
  before(async () => {
    api = await startAnthropicApi(KEY);
    silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });
  after(async () => {
    await api.close();
    silent.closeAllConnections();
    silent.close();
  });

  it('tells ok, refused, unreachable and timed out apart, and never puts the value in a message', async () => {
    assert.deepEqual(await validateCredential('anthropic_api_key', new Private(KEY), api.url), { ok: true });
    const refused = await validateCredential('anthropic_api_key', new Private(`${KEY}x`), api.url);
    assert.equal(refused.ok ? 'ok' : refused.kind, 'refused');
    const down = await validateCredential('anthropic_api_key', new Private(KEY), 'http://127.0.0.1:1');
    assert.equal(down.ok ? 'ok' : down.kind, 'network');
    const slow = await validateCredential('anthropic_api_key', new Private(KEY), silentUrl, 300);
    assert.equal(slow.ok ? 'ok' : slow.kind, 'timeout');
    for (const r of [refused, down, slow]) assert.ok(!JSON.stringify(r).includes(KEY));
  });
});

describe('the inference-credentials API', () => {
  let tmp: string;
  let srv: RunningServer;
  let api: ModelApiServer;
  const http = (method: string, path: string, body?: unknown) => call(srv.url, srv.bootstrapKey!, method, path, body);
  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-creds-')));
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {} });
    api = await startAnthropicApi(KEY);
  });
  after(async () => {
    await srv?.stop();
    await api?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('stores write-only, sealed at rest; validates; lists without values; removes', async () => {
    assert.equal(statSync(join(tmp, 'data', 'secret-key')).mode & 0o777, 0o600);
    const wrong = await http('PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: `${KEY}x`,
      base_url: api.url,
    });
    assert.deepEqual([wrong.status, wrong.body.error], [422, 'credential_refused']);
    const down = await http('PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: KEY,
      base_url: 'http://127.0.0.1:1',
    });
    assert.deepEqual([down.status, down.body.error], [502, 'network']);
    assert.equal(
      (await http('GET', '/api/account/inference-credentials')).body.data.length,
      0,
      'nothing stored after a failed check',
    );

    const ok = await http('PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: KEY,
      base_url: api.url,
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual([ok.body.data.provider, ok.body.data.base_url], ['anthropic_api_key', api.url]);
    const unchecked = await http('PUT', '/api/account/inference-credentials/gemini_api_key', {
      value: 'AIzaUnchecked',
      validate: false,
    });
    assert.equal(unchecked.status, 200);
    const list = await http('GET', '/api/account/inference-credentials');
    assert.deepEqual(
      list.body.data.map((c: { provider: string }) => c.provider),
      ['anthropic_api_key', 'gemini_api_key'],
    );
    for (const r of [wrong, down, ok, unchecked, list]) assert.ok(!JSON.stringify(r.body).includes(KEY));

    const rows = await srv.database.db.execute(sql`SELECT sealed FROM inference_credentials`);
    const stored = JSON.stringify(rows);
    assert.ok(!stored.includes(KEY) && !stored.includes('AIzaUnchecked'), 'sealed at rest');

    const bad = await http('PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: 'has space inside',
    });
    assert.deepEqual([bad.status, bad.body.error], [422, 'validation_failed']);
    assert.ok(!JSON.stringify(bad.body).includes('has space inside'));
    const unknown = await http('PUT', '/api/account/inference-credentials/aws_key', { value: 'x', validate: false });
    assert.equal(unknown.status, 422);
    const badUrl = await http('PUT', '/api/account/inference-credentials/openai_api_key', {
      value: 'sk-x',
      base_url: 'ftp://x',
      validate: false,
    });
    assert.equal(badUrl.status, 422);

    assert.equal((await http('DELETE', '/api/account/inference-credentials/gemini_api_key')).status, 204);
    assert.equal((await http('DELETE', '/api/account/inference-credentials/gemini_api_key')).status, 404);
    assert.equal((await call(srv.url, null, 'GET', '/api/account/inference-credentials')).status, 401);
  });

  it('refuses a conversation whose runtime lacks its credential before any sandbox work', async () => {
    const agent = await http('POST', '/api/agents', {
      name: 'codex-agent',
      runtime: 'codex',
      model: 'openai/gpt-5',
      sandbox_provider: null,
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const conv = await http('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(conv.status, 422, JSON.stringify(conv.body));
    assert.equal(conv.body.error, 'inference_credential_missing');
    assert.match(conv.body.message, /fountain credentials set openai_api_key/);
    assert.equal((await http('GET', '/api/conversations')).body.data.length, 0, 'no conversation, no sandbox');
  });
});
