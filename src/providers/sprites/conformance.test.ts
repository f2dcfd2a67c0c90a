import { readFileSync, existsSync } from 'node:fs';
import { runConformanceSuite } from '../../sandbox/conformance/index.ts';
import { Private, mintHostedName, type Handle } from '../../sandbox/index.ts';
import { SpritesStub } from '../../../test/stubs/sprites/server.ts';
import { SpritesAdapter } from './adapter.ts';

const TOKEN = 'sprites-conformance-token-3e8d1b7a';
const DROP = 'SEVER-CONNECTION-NOW';
let stub: SpritesStub | undefined;
let adapter: SpritesAdapter | undefined;

const name = (): string => {
  const n = mintHostedName('c0nf0rm4', null);
  if (!n.ok) throw new Error(n.error);
  return n.value;
};

runConformanceSuite('sprites adapter against the Sprites stub', {
  adapter: () => adapter!,
  name,
  fixtures: {
    execOk: { cmd: 'sh', args: ['-c', 'echo hello-sprites'], expectedStdout: 'hello-sprites' },
    execFail: { cmd: 'sh', args: ['-c', 'echo failing; echo bad >&2; exit 3'], nonzeroCode: 3 },
    spawnOk: { cmd: 'sh', args: ['-c', 'echo spawned-ok'] },
    // The stub severs the socket (no exit frame) once this output has been delivered.
    spawnDrop: { cmd: 'sh', args: ['-c', `echo about-to-drop-${DROP}; sleep 30`] },
    // `cat` echoes each write as it arrives, newline or not, and exits 0 on EOF.
    spawnStay: { cmd: 'sh', args: ['-c', 'echo ready; exec cat'] },
  },
  spawnOpts: { detachable: true },
  before: async () => {
    // Quirks turned up: a slow acknowledgment, a tiny scrollback, a short disconnect grace, quick hibernation.
    stub = await SpritesStub.start({
      token: TOKEN,
      sessionInfoDelayMs: 50,
      scrollbackBytes: 8,
      defaultMaxRunAfterDisconnectMs: 300,
      hibernateAfterMs: 500,
    });
    stub.faults.dropOnOutput = DROP;
    adapter = new SpritesAdapter({ token: TOKEN, baseUrl: stub.url });
  },
  after: async () => {
    await stub?.close();
  },
  readFile: async (handle: Handle, path: string) => {
    const host = stub?.hostPath(handle.name, path);
    return host && existsSync(host) ? readFileSync(host) : null;
  },
  brokenTransport: async () => {
    // A stub that was started and stopped: its port refuses connections.
    const gone = await SpritesStub.start({ token: TOKEN });
    const url = gone.url;
    await gone.close();
    const broken = new SpritesAdapter({ token: TOKEN, baseUrl: url, timeoutMs: 2000 });
    return { adapter: broken, handle: broken.buildHandle(name()) };
  },
  secret: async () => {
    const created = await adapter!.lifecycle.create(name());
    if (!created.ok) throw new Error(`create failed: ${created.error.code}`);
    // The handle carries the bearer token in its private part, as create hands it out.
    return { handle: adapter!.buildHandle(created.value.name, new Private({ token: TOKEN })), value: TOKEN };
  },
});
