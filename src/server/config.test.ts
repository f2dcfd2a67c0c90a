import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ConfigError, parseServerConfig, SERVER_ENV_VARS } from './config.ts';

describe('server configuration', () => {
  it('has defaults for an empty environment', () => {
    assert.deepEqual(parseServerConfig({}), {
      runnersEnabled: true,
      databaseUrl: undefined,
      bootstrapKey: undefined,
      runnerHeartbeatMs: 20_000,
      runnerCallTimeoutMs: 30_000,
    });
  });

  it('treats blank values as unset', () => {
    const c = parseServerConfig({ SANDBOX_RUNNERS_ENABLED: '  ', FOUNTAIN_DATABASE_URL: '', FOUNTAIN_BOOTSTRAP_KEY: ' ' });
    assert.equal(c.runnersEnabled, true);
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.bootstrapKey, undefined);
  });

  it('parses each variable', () => {
    const key = `ftn_${'ab'.repeat(32)}`;
    const c = parseServerConfig({
      SANDBOX_RUNNERS_ENABLED: 'False',
      FOUNTAIN_DATABASE_URL: 'postgres://u@h:5432/db',
      FOUNTAIN_BOOTSTRAP_KEY: key,
      FOUNTAIN_RUNNER_HEARTBEAT_MS: '250',
      FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: '1000',
    });
    assert.deepEqual(c, { runnersEnabled: false, databaseUrl: 'postgres://u@h:5432/db', bootstrapKey: key, runnerHeartbeatMs: 250, runnerCallTimeoutMs: 1000 });
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
    ];
    for (const [env, name] of cases) {
      assert.throws(
        () => parseServerConfig(env),
        (e: unknown) => e instanceof ConfigError && e.variable === name && e.message.startsWith(`${name}: `),
        name,
      );
    }
  });

  it('reads only variables that docs/configuration.md documents', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    for (const name of SERVER_ENV_VARS) assert.ok(doc.includes(`\`${name}\``), `${name} is not documented`);
  });
});
