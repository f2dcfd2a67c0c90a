/**
 * The conformance suite against the runner adapter over a FakeDaemon: real connection code, real
 * JSON frames over a real loopback WebSocket, a LocalRunnerHost.
 */
import pino from 'pino';
import type { SandboxAdapter } from '../../sandbox/index.ts';
import { Private, mintRunnerName } from '../../sandbox/index.ts';
import { runConformanceSuite } from '../../sandbox/conformance/index.ts';
import { RunnerAdapter } from './adapter.ts';
import { startFakeDaemon } from './fake-daemon.ts';
import type { FakeDaemon } from './fake-daemon.ts';
import { LocalRunnerHost } from './host.ts';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const CONFORMANCE_RUNNER_ID = '0f0e0d0c-0b0a-4908-8706-050403020100';
const OFFLINE_RUNNER_ID = 'a0a1a2a3-b0b1-4c0c-8d0d-e0e1e2e3e4e5';

const minter = (runnerId: string) => (): string => {
  const r = mintRunnerName(runnerId);
  if (!r.ok) throw new Error(r.error);
  return r.value;
};

/**
 * spawn_drop really drops the runner's socket; the daemon dials again at once, as the real one
 * does. Until the server has re-registered it every op is honestly `runner_offline`, so each
 * call waits for the daemon to be back first — only then is the next test about the adapter.
 */
function afterReconnect(adapter: SandboxAdapter, daemon: FakeDaemon): SandboxAdapter {
  const waiting = <T extends object>(part: T): T =>
    new Proxy(part, {
      get(target, prop, receiver) {
        const v: unknown = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function') return v;
        return async (...args: unknown[]) => {
          if (!daemon.online) await daemon.waitOnline().catch(() => undefined);
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  return {
    provider: adapter.provider,
    buildHandle: (name, priv) => adapter.buildHandle(name, priv),
    offered: (handle) => adapter.offered?.(handle),
    lifecycle: waiting(adapter.lifecycle),
    files: waiting(adapter.files),
    processes: waiting(adapter.processes),
    ...(adapter.network ? { network: waiting(adapter.network) } : {}),
  };
}

let daemon: FakeDaemon | undefined;
let adapter: SandboxAdapter | undefined;
let runner: RunnerAdapter | undefined;

runConformanceSuite('runner adapter against the FakeDaemon', {
  adapter: () => {
    if (!adapter) throw new Error('the fake daemon did not start');
    return adapter;
  },
  name: minter(CONFORMANCE_RUNNER_ID),
  fixtures: {
    execOk: {
      cmd: 'fake',
      args: ['out:hello from the fake daemon', 'exit:0'],
      expectedStdout: 'hello from the fake daemon',
    },
    execFail: { cmd: 'fake', args: ['out:failing', 'err:why', 'exit:3'], nonzeroCode: 3 },
    spawnOk: { cmd: 'fake', args: ['out:spawned', 'exit:0'] },
    spawnDrop: { cmd: 'fake', args: ['out:about to drop', 'drop'] },
    spawnStay: { cmd: 'fake', args: ['out:ready', 'stay'] },
  },
  before: async () => {
    daemon = await startFakeDaemon({ runnerId: CONFORMANCE_RUNNER_ID, name: 'conformance', logger });
    runner = new RunnerAdapter(daemon.hub.host, { logger });
    adapter = afterReconnect(runner, daemon);
  },
  after: async () => {
    await daemon?.stop();
  },
  readFile: async (handle, path) => daemon?.file(handle.name, path) ?? null,
  // Runner handles carry no credential of their own; the probe checks the adapter never renders one.
  secret: async () => {
    const value = 'ftn_conformance_secret_0123456789abcdef';
    const created = await adapter!.lifecycle.create(minter(CONFORMANCE_RUNNER_ID)());
    if (!created.ok) throw new Error(`create failed: ${created.error.code}`);
    return { handle: runner!.buildHandle(created.value.name, new Private(value)), value };
  },
  // A handle whose runner is not connected: must be unavailable(runner_offline), never not_found.
  brokenTransport: async () => {
    const offline = new RunnerAdapter(new LocalRunnerHost(), { logger });
    return { adapter: offline, handle: offline.buildHandle(minter(OFFLINE_RUNNER_ID)()) };
  },
});
