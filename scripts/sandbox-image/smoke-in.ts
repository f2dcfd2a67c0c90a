/**
 * Runs smoke.sh in a new, short-lived sandbox of one hosted provider through Fountain's own adapter
 * (configured from the environment like the server), prints its output, and always destroys it.
 * Usage: npx tsx scripts/sandbox-image/smoke-in.ts <e2b|daytona|sprites>. Exit 0 only on the OK marker.
 */
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { LocalRunnerHost } from '../../src/providers/runner/host.ts';
import {
  describeError,
  isKnownProvider,
  PROVIDER_CREDENTIAL_ENV,
  type Handle,
  type KnownProvider,
} from '../../src/sandbox/index.ts';
import { ConfigError, parseServerConfig } from '../../src/server/config.ts';
import { createProviderRegistry } from '../../src/server/registry.ts';
import { runImageSmoke } from './run-smoke.ts';

const arg = process.argv[2] ?? '';
if (!isKnownProvider(arg) || arg === 'runner') {
  process.stderr.write(`usage: smoke-in.ts <${Object.keys(PROVIDER_CREDENTIAL_ENV).join('|')}>\n`);
  process.exit(2);
}
const provider: Exclude<KnownProvider, 'runner'> = arg;

let config;
try {
  config = parseServerConfig(process.env);
} catch (e) {
  process.stderr.write(`${e instanceof ConfigError ? e.message : String(e)}\n`);
  process.exit(2);
}
const logger = pino({ level: 'warn' }, pino.destination(2));
const registry = await createProviderRegistry(config, process.env, { host: new LocalRunnerHost(), logger });
if (!registry.isEnabled(provider)) {
  process.stderr.write(`${PROVIDER_CREDENTIAL_ENV[provider]} is not set\n`);
  process.exit(2);
}
const adapter = registry.adapterFor(provider);
// Its own name space, so nothing mistakes the smoke sandbox for a conversation's.
const name = `fountain-imgsmoke-${randomBytes(4).toString('hex')}`;

let handle: Handle | undefined;
const cleanup = async () => {
  if (!handle) return;
  const h = handle;
  handle = undefined;
  const r = await adapter.lifecycle.destroy(h);
  process.stderr.write(r.ok ? `destroyed ${name}\n` : `could not destroy ${name}: ${describeError(r.error)}\n`);
};
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

let code = 1;
try {
  const created = await adapter.lifecycle.create(name);
  if (!created.ok) throw new Error(`create ${name}: ${describeError(created.error)}`);
  handle = created.value;
  process.stderr.write(`created ${name} on ${provider}\n`);
  const expect = process.env.SMOKE_EXPECT_USER?.trim();
  const run = await runImageSmoke(adapter, handle, expect ? { env: [['SMOKE_EXPECT_USER', expect]] } : {});
  if (!run.ok) throw new Error(`exec: ${describeError(run.error)}`);
  process.stdout.write(run.value.output);
  if (run.value.verdict.kind === 'none') process.stderr.write('no verdict marker: the smoke did not finish\n');
  code = run.value.verdict.kind === 'ok' ? 0 : 1;
} catch (e) {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
} finally {
  await cleanup();
}
process.exit(code);
