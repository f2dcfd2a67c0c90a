import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Private } from '../sandbox/index.ts';
import { ConfigError, parseServerConfig, SERVER_ENV_GROUPS, SERVER_ENV_VARS } from './config.ts';

const refuses = (env: Record<string, string>, name: string) =>
  assert.throws(
    () => parseServerConfig(env),
    (e: unknown) => e instanceof ConfigError && e.variable === name && e.message.startsWith(`${name}: `),
    `${JSON.stringify(env)} should be refused naming ${name}`,
  );

describe('server configuration', () => {
  it('has defaults for an empty environment', () => {
    const c = parseServerConfig({});
    assert.equal(c.runnersEnabled, true);
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.bootstrapKey, undefined);
    assert.equal(c.runnerHeartbeatMs, 20_000);
    assert.equal(c.runnerCallTimeoutMs, 30_000);
    assert.equal(c.sessionSecret, undefined);
    assert.equal(c.publicUrl, null);
    assert.equal(c.sandboxProvider, 'runner');
    assert.equal(c.sandboxProviderExplicit, false);
    assert.equal(c.maxLifetimeMs, 0);
    assert.equal(c.engine.idleTimeoutMs, 60 * 60_000);
    assert.equal(c.engine.sweepIntervalMs, 60_000);
    assert.equal(c.engine.askTimeoutMs, 300_000);
    assert.equal(c.engine.installTimeoutMs, 180_000);
    assert.equal(c.engine.acpCallTimeoutMs, 30_000);
    assert.equal(c.engine.turnSilenceTimeoutMs, 600_000);
    assert.deepEqual(c.providers, { e2b: null, daytona: null, sprites: null });
    assert.equal(c.brokerAllowUnenforced, false);
    assert.equal(c.nodeHeartbeatMs, 5000);
    assert.equal(c.nodeExpiryMs, 30_000);
  });

  it('takes the agent timeouts in seconds; a silence timeout of 0 means never', () => {
    const c = parseServerConfig({
      FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS: '900',
      FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS: '120',
      FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS: '0',
    });
    assert.equal(c.engine.installTimeoutMs, 900_000);
    assert.equal(c.engine.acpCallTimeoutMs, 120_000);
    assert.equal(c.engine.turnSilenceTimeoutMs, 0);
  });

  it('treats blank values as unset, every one of them', () => {
    const blanks = Object.fromEntries(SERVER_ENV_VARS.map((v) => [v, '  ']));
    assert.deepEqual(parseServerConfig(blanks), parseServerConfig({}));
  });

  it('parses each variable', () => {
    const key = `ftn_${'ab'.repeat(32)}`;
    const c = parseServerConfig({
      SANDBOX_RUNNERS_ENABLED: 'False',
      FOUNTAIN_DATABASE_URL: 'postgres://u@h:5432/db',
      FOUNTAIN_BOOTSTRAP_KEY: key,
      FOUNTAIN_RUNNER_HEARTBEAT_MS: '250',
      FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: '1000',
      FOUNTAIN_SESSION_SECRET: 's'.repeat(32),
      PUBLIC_URL: 'https://fountain.example/',
      SANDBOX_PROVIDER: ' e2b ',
      SANDBOX_IDLE_TIMEOUT_MINUTES: '0',
      SANDBOX_MAX_LIFETIME_HOURS: '24',
      FOUNTAIN_IDLE_SWEEP_SECONDS: '5',
      FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS: '30',
      E2B_API_KEY: 'e2b_key',
      E2B_BASE_URL: 'http://127.0.0.1:9000',
      E2B_SANDBOX_URL: 'http://127.0.0.1:9001',
      E2B_TEMPLATE: 'fountain',
      E2B_USER: 'sprite',
      DAYTONA_API_KEY: 'dtn_key',
      DAYTONA_API_URL: 'http://127.0.0.1:9002/api',
      DAYTONA_SNAPSHOT: 'fountain',
      SPRITES_TOKEN: 'spr_token',
      SPRITES_BASE_URL: 'http://127.0.0.1:9003',
      SPRITES_TIMEOUT_MS: '5000',
      BROKER_ALLOW_UNENFORCED: 'true',
      FOUNTAIN_SCHEDULE_TICK_MS: '100',
      FOUNTAIN_SCHEDULE_SNOOZE_MS: '200',
      FOUNTAIN_SCHEDULE_PATIENCE_MS: '5000',
      FOUNTAIN_NODE_HEARTBEAT_MS: '200',
      FOUNTAIN_NODE_EXPIRY_MS: '400',
      FOUNTAIN_PGLITE_TEMPLATE_DIR: '/var/cache/fountain',
    });
    assert.equal(c.runnersEnabled, false);
    assert.equal(c.pgliteTemplateDir, '/var/cache/fountain');
    assert.equal(parseServerConfig({ FOUNTAIN_PGLITE_TEMPLATE_DIR: 'off' }).pgliteTemplateDir, null);
    assert.equal(parseServerConfig({}).pgliteTemplateDir, undefined);
    assert.equal(c.databaseUrl, 'postgres://u@h:5432/db');
    assert.equal(c.bootstrapKey, key);
    assert.equal(c.runnerHeartbeatMs, 250);
    assert.equal(c.runnerCallTimeoutMs, 1000);
    assert.equal(c.sessionSecret, 's'.repeat(32));
    assert.equal(c.publicUrl, 'https://fountain.example');
    assert.equal(c.engine.publicUrl, 'https://fountain.example');
    assert.equal(c.sandboxProvider, 'e2b');
    assert.equal(c.sandboxProviderExplicit, true);
    assert.equal(c.engine.idleTimeoutMs, 0);
    assert.equal(c.maxLifetimeMs, 24 * 3_600_000);
    assert.equal(c.engine.sweepIntervalMs, 5000);
    assert.equal(c.engine.askTimeoutMs, 30_000);
    assert.deepEqual(c.providers.e2b, {
      apiKey: 'e2b_key',
      baseUrl: 'http://127.0.0.1:9000',
      sandboxUrl: 'http://127.0.0.1:9001',
      template: 'fountain',
      user: 'sprite',
    });
    assert.deepEqual(c.providers.daytona, {
      apiKey: 'dtn_key',
      apiUrl: 'http://127.0.0.1:9002/api',
      snapshot: 'fountain',
    });
    assert.ok(c.providers.sprites?.token instanceof Private);
    assert.equal((c.providers.sprites.token as Private<string>).reveal(), 'spr_token');
    assert.equal(c.providers.sprites.baseUrl, 'http://127.0.0.1:9003');
    assert.equal(c.providers.sprites.timeoutMs, 5000);
    assert.equal(c.brokerAllowUnenforced, true);
    assert.equal(c.scheduleTickMs, 100);
    assert.equal(c.scheduleSnoozeMs, 200);
    assert.equal(c.schedulePatienceMs, 5000);
    assert.equal(c.nodeHeartbeatMs, 200);
    assert.equal(c.nodeExpiryMs, 400);
    assert.equal(parseServerConfig({ SANDBOX_RUNNERS_ENABLED: '0' }).runnersEnabled, false);
    assert.equal(parseServerConfig({ SANDBOX_RUNNERS_ENABLED: 'yes' }).runnersEnabled, true);
  });

  it('names the bad variable', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ SANDBOX_RUNNERS_ENABLED: 'maybe' }, 'SANDBOX_RUNNERS_ENABLED'],
      [{ FOUNTAIN_DATABASE_URL: 'mysql://x' }, 'FOUNTAIN_DATABASE_URL'],
      [{ FOUNTAIN_BOOTSTRAP_KEY: `ftn_${'AB'.repeat(32)}` }, 'FOUNTAIN_BOOTSTRAP_KEY'],
      [{ FOUNTAIN_RUNNER_HEARTBEAT_MS: '-5' }, 'FOUNTAIN_RUNNER_HEARTBEAT_MS'],
      [{ FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: '1.5' }, 'FOUNTAIN_RUNNER_CALL_TIMEOUT_MS'],
      [{ FOUNTAIN_SESSION_SECRET: 'short' }, 'FOUNTAIN_SESSION_SECRET'],
      [{ PUBLIC_URL: 'fountain.example' }, 'PUBLIC_URL'],
      [{ FOUNTAIN_SECRET_KEY: 'too-short' }, 'FOUNTAIN_SECRET_KEY'],
      [{ FOUNTAIN_SKILLS_GIT_URL: 'http://github.com' }, 'FOUNTAIN_SKILLS_GIT_URL'],
      [{ SANDBOX_PROVIDER: 'modal' }, 'SANDBOX_PROVIDER'],
      [{ SANDBOX_PROVIDER: 'fake' }, 'SANDBOX_PROVIDER'],
      [{ SANDBOX_IDLE_TIMEOUT_MINUTES: 'sixty' }, 'SANDBOX_IDLE_TIMEOUT_MINUTES'],
      [{ SANDBOX_MAX_LIFETIME_HOURS: '-1' }, 'SANDBOX_MAX_LIFETIME_HOURS'],
      [{ FOUNTAIN_IDLE_SWEEP_SECONDS: '0' }, 'FOUNTAIN_IDLE_SWEEP_SECONDS'],
      [{ FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS: '3e2' }, 'FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS'],
      [{ E2B_BASE_URL: 'ftp://e2b' }, 'E2B_BASE_URL'],
      [{ E2B_SANDBOX_URL: 'sandbox.e2b.app' }, 'E2B_SANDBOX_URL'],
      [{ E2B_USER: 'Root User' }, 'E2B_USER'],
      [{ DAYTONA_API_URL: 'app.daytona.io' }, 'DAYTONA_API_URL'],
      [{ SPRITES_BASE_URL: 'ws://sprites' }, 'SPRITES_BASE_URL'],
      [{ SPRITES_TIMEOUT_MS: '700000' }, 'SPRITES_TIMEOUT_MS'],
      [{ BROKER_ALLOW_UNENFORCED: 'sometimes' }, 'BROKER_ALLOW_UNENFORCED'],
      [{ FOUNTAIN_RUNNER_RECOVERY_SECONDS: '0' }, 'FOUNTAIN_RUNNER_RECOVERY_SECONDS'],
      [{ FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS: '0' }, 'FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS'],
      [{ FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS: '30s' }, 'FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS'],
      [{ FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS: '-1' }, 'FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS'],
      [{ FOUNTAIN_MAX_RUNNING_TURNS: '0' }, 'FOUNTAIN_MAX_RUNNING_TURNS'],
      [{ FOUNTAIN_MAX_SANDBOXES: 'many' }, 'FOUNTAIN_MAX_SANDBOXES'],
      [{ FOUNTAIN_QUEUE_EXPIRY_SECONDS: '0' }, 'FOUNTAIN_QUEUE_EXPIRY_SECONDS'],
      [{ FOUNTAIN_SCHEDULE_TICK_MS: '0' }, 'FOUNTAIN_SCHEDULE_TICK_MS'],
      [{ FOUNTAIN_SCHEDULE_SNOOZE_MS: 'soon' }, 'FOUNTAIN_SCHEDULE_SNOOZE_MS'],
      [{ FOUNTAIN_SCHEDULE_PATIENCE_MS: '-1' }, 'FOUNTAIN_SCHEDULE_PATIENCE_MS'],
      [{ FOUNTAIN_NODE_HEARTBEAT_MS: '5' }, 'FOUNTAIN_NODE_HEARTBEAT_MS'],
      [{ FOUNTAIN_NODE_EXPIRY_MS: 'never' }, 'FOUNTAIN_NODE_EXPIRY_MS'],
      [{ FOUNTAIN_PGLITE_TEMPLATE_DIR: 'cache/pglite' }, 'FOUNTAIN_PGLITE_TEMPLATE_DIR'],
      [{ FOUNTAIN_MODEL_PRICES: '{"my-model": {"input": -1, "output": 4}}' }, 'FOUNTAIN_MODEL_PRICES'],
      [{ FOUNTAIN_MODEL_PRICES: 'cheap' }, 'FOUNTAIN_MODEL_PRICES'],
      // A node that may not miss a single beat would lose its turns to every hiccup.
      [{ FOUNTAIN_NODE_HEARTBEAT_MS: '1000', FOUNTAIN_NODE_EXPIRY_MS: '1500' }, 'FOUNTAIN_NODE_EXPIRY_MS'],
    ];
    for (const [env, name] of cases) refuses(env, name);
    // Every variable with a syntax has a refusal above.
    const free = new Set(['E2B_API_KEY', 'E2B_TEMPLATE', 'DAYTONA_API_KEY', 'DAYTONA_SNAPSHOT', 'SPRITES_TOKEN']);
    const covered = new Set(cases.map(([, name]) => name));
    for (const v of SERVER_ENV_VARS) if (!free.has(v)) assert.ok(covered.has(v), `${v} has no refusal case`);
  });

  it('groups every variable exactly once', () => {
    const grouped = Object.values(SERVER_ENV_GROUPS).flat();
    assert.deepEqual([...grouped].sort(), [...SERVER_ENV_VARS].sort());
    assert.equal(new Set(grouped).size, grouped.length);
  });
});
