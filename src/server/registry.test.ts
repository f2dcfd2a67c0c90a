import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { LocalRunnerHost } from '../providers/runner/host.ts';
import { KNOWN_PROVIDERS } from '../sandbox/providers.ts';
import { ConfigError, parseServerConfig, type Env } from './config.ts';
import {
  PROVIDER_WIRING,
  checkDefaultProvider,
  createProviderRegistry,
  hostedAdapters,
  plannedProviders,
} from './registry.ts';
import { startServer } from './start.ts';

const deps = { host: new LocalRunnerHost(), logger: pino({ enabled: false }) };
const hostedOf = async (env: Env) => (await hostedAdapters(parseServerConfig(env), deps)).map((a) => a.provider);
const registryFor = (env: Env) => createProviderRegistry(parseServerConfig(env), env, deps);
const ALL_KEYS: Env = { E2B_API_KEY: 'k', DAYTONA_API_KEY: 'k', SPRITES_TOKEN: 't' };

const bootRefusal = (env: Env, pattern: RegExp) => {
  assert.throws(
    () => checkDefaultProvider(parseServerConfig(env), env),
    (e: unknown) => e instanceof ConfigError && e.variable === 'SANDBOX_PROVIDER' && pattern.test(e.message),
    JSON.stringify(env),
  );
};

describe('provider registry wiring', () => {
  it('wires each known provider, and nothing else', () => {
    assert.deepEqual(Object.keys(PROVIDER_WIRING).sort(), [...KNOWN_PROVIDERS].sort());
  });

  it('plans at boot exactly what the built registry then reports enabled', async () => {
    const envs: Env[] = [
      {},
      ALL_KEYS,
      { SANDBOX_RUNNERS_ENABLED: 'no', E2B_API_KEY: 'k' },
      { DAYTONA_API_KEY: '  ', SPRITES_TOKEN: 't' },
    ];
    for (const env of envs)
      assert.deepEqual(
        plannedProviders(parseServerConfig(env), env),
        (await registryFor(env)).enabled(),
        JSON.stringify(env),
      );
  });

  it('hands the engine the hosted adapters whose credentials are set', async () => {
    assert.deepEqual(await hostedOf({}), []);
    assert.deepEqual(await hostedOf(ALL_KEYS), ['e2b', 'daytona', 'sprites']);
    assert.deepEqual(await hostedOf({ SPRITES_TOKEN: 't', DAYTONA_API_KEY: '' }), ['sprites']);
  });

  it('turns on only the runner without credentials', async () => {
    const r = await registryFor({});
    assert.deepEqual(r.enabled(), ['runner']);
    for (const p of ['e2b', 'daytona', 'sprites'] as const) assert.equal(r.isRegistered(p), false, p);
    assert.equal(r.adapterFor('runner').provider, 'runner');
  });

  it('registers each hosted provider whose credential is set, in registry order', async () => {
    const r = await registryFor(ALL_KEYS);
    assert.deepEqual(r.enabled(), [...KNOWN_PROVIDERS]);
    for (const p of KNOWN_PROVIDERS) assert.equal(r.adapterFor(p).provider, p);
    assert.deepEqual((await registryFor({ SANDBOX_RUNNERS_ENABLED: 'false', SPRITES_TOKEN: 't' })).enabled(), [
      'sprites',
    ]);
  });
});

describe('SANDBOX_PROVIDER boot check', () => {
  it('accepts an enabled default, explicit or implicit', () => {
    for (const env of [
      {},
      { SANDBOX_PROVIDER: 'runner' },
      { SANDBOX_PROVIDER: 'e2b', E2B_API_KEY: 'k' },
      { SANDBOX_RUNNERS_ENABLED: 'false', SANDBOX_PROVIDER: 'sprites', SPRITES_TOKEN: 't' },
      { SANDBOX_RUNNERS_ENABLED: 'false' },
    ]) {
      checkDefaultProvider(parseServerConfig(env), env);
    }
  });

  it('refuses an explicit default that is not enabled, saying what is missing', () => {
    bootRefusal({ SANDBOX_PROVIDER: 'e2b' }, /"e2b" is not enabled \(E2B_API_KEY is not set\); enabled: runner$/);
    bootRefusal({ SANDBOX_PROVIDER: 'daytona', DAYTONA_API_KEY: ' ' }, /DAYTONA_API_KEY is not set/);
    bootRefusal({ SANDBOX_PROVIDER: 'sprites', E2B_API_KEY: 'k' }, /SPRITES_TOKEN is not set\); enabled: runner, e2b$/);
    bootRefusal(
      { SANDBOX_PROVIDER: 'runner', SANDBOX_RUNNERS_ENABLED: 'off' },
      /SANDBOX_RUNNERS_ENABLED is false\); enabled: none$/,
    );
  });

  it('stops startServer before it listens, naming the variable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-boot-'));
    try {
      const boot = (env: Env) =>
        startServer({ dataDir: dir, port: 0, env, acceptRunnerSocket: () => assert.fail('no upgrade expected') });
      await assert.rejects(
        boot({ SANDBOX_PROVIDER: 'modal' }),
        (e: unknown) =>
          e instanceof ConfigError &&
          /^SANDBOX_PROVIDER: must be one of runner, e2b, daytona, sprites$/.test(e.message),
      );
      await assert.rejects(
        boot({ SANDBOX_PROVIDER: 'daytona' }),
        (e: unknown) => e instanceof ConfigError && e.variable === 'SANDBOX_PROVIDER',
      );
      // Refused before the database opened; the next boot on the same directory works.
      const srv = await boot({
        SANDBOX_PROVIDER: 'sprites',
        SPRITES_TOKEN: 't',
        SPRITES_BASE_URL: 'http://127.0.0.1:9',
      });
      try {
        assert.deepEqual(srv.registry.enabled(), ['runner', 'sprites']);
        assert.equal(srv.config.sandboxProvider, 'sprites');
      } finally {
        await srv.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
