import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeFrame } from '../../../wire/index.ts';
import type { Reply, StreamFrame } from '../../../wire/index.ts';
import { ProtocolServer } from '../../protocol-server.ts';
import type { FrameTransport } from '../../protocol-server.ts';
import { captureLogger, until } from '../../testing.ts';
import { VmBackend } from './index.ts';
import { parseSubnet } from './network.ts';
import { QemuDriver } from './qemu-driver.ts';
import {
  INITRD,
  KERNEL,
  QEMU_BIN,
  QEMU_MACHINE,
  ROOTFS,
  assertRealVmsAvailable,
  realVmSkip,
} from './testing/guest-image.ts';

/**
 * Real VMs: QEMU under software emulation (q35 by default), booting the image that
 * scripts/microvm/build-guest-image.sh builds. Two boots in all: the first, and after the daemon restart.
 */
const skip = realVmSkip();

class Wire implements FrameTransport {
  readonly frames: Array<Reply | StreamFrame> = [];
  open = true;
  send(frame: Buffer): void {
    const text = frame.toString('utf8');
    const d = decodeFrame(text);
    if (d.kind === 'reply') this.frames.push(d.reply);
    else if (d.kind === 'stream') this.frames.push(d.frame);
  }
  drained(): Promise<void> {
    return Promise.resolve();
  }
  of(sid: string): StreamFrame[] {
    return this.frames.filter((f): f is StreamFrame => 'stream' in f && f.session_id === sid);
  }
  text(sid: string, stream: 'stdout' | 'stderr' = 'stdout'): string {
    return this.of(sid)
      .map((f) => (f.stream === stream ? Buffer.from(f.data, 'base64').toString() : ''))
      .join('');
  }
}

const HANG_GUARD = 180_000;
let nextId = 1;
async function call(server: ProtocolServer, wire: Wire, req: Record<string, unknown>): Promise<Reply & { id: number }> {
  const id = nextId++;
  server.receive(JSON.stringify({ ...req, id }));
  return (await until(
    () => wire.frames.find((f): f is Reply => 'ok' in f && f.id === id),
    `reply to ${String(req.op)}`,
    HANG_GUARD,
  )) as Reply & { id: number };
}
const out = (r: Reply) =>
  r.ok ? Buffer.from(String(r.result.output), 'base64').toString() : `error ${r.error}: ${r.detail}`;

describe('microVM backend with real VMs (QEMU, software emulation)', { skip, timeout: 600_000 }, () => {
  let dir: string;
  const backends: VmBackend[] = [];
  const subnet = parseSubnet('10.61.0.0/24');
  const open = () => {
    assert.ok(subnet.ok);
    const b = new VmBackend({
      root: join(dir, 'root'),
      logger: captureLogger().logger,
      driver: new QemuDriver(QEMU_BIN, QEMU_MACHINE),
      kernel: KERNEL,
      initrd: INITRD,
      rootfs: ROOTFS,
      vcpus: 1,
      memoryMib: 1024,
      bridge: null,
      subnet: subnet.value,
      // A hang guard, far above the product's 60 s: TCG on two cores shared with other work.
      timings: { bootTimeoutMs: 240_000 },
    });
    backends.push(b);
    return b;
  };

  before(() => {
    assertRealVmsAvailable();
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-qemu-')));
  });
  after(async () => {
    for (const b of backends) await b.stopAll();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('boots a guest that runs commands in /home/sprite; files survive suspend, resume and a daemon restart; a killed VM ends its session with 137', async () => {
    let backend = open();
    let wire = new Wire();
    let server = new ProtocolServer(backend, wire, captureLogger().logger);

    const created = await call(server, wire, { op: 'create', name: 'vm1' });
    assert.ok(created.ok, `create: ${JSON.stringify(created)}`);
    const ex = await call(server, wire, {
      op: 'exec',
      name: 'vm1',
      cmd: 'bash',
      args: ['-c', 'echo "$HOME"; pwd; node -e "console.log(1+1)"; git --version | cut -d" " -f1'],
      timeout_ms: 60_000,
    });
    assert.equal(out(ex), '/home/sprite\n/home/sprite\n2\ngit\n');

    const w = await call(server, wire, {
      op: 'write_file',
      name: 'vm1',
      path: '/home/sprite/memory.txt',
      data: Buffer.from('remembered').toString('base64'),
      mode: 0o600,
    });
    assert.ok(w.ok);
    // A session started before the pause carries on after it: the RAM stayed.
    const sp = await call(server, wire, {
      op: 'spawn',
      name: 'vm1',
      cmd: 'bash',
      args: ['-c', 'echo before; read line; echo "after $line"'],
      stdin: true,
    });
    assert.ok(sp.ok);
    const sid = String(sp.result.session_id);
    await until(() => wire.text(sid).includes('before'), 'session output', HANG_GUARD);
    assert.ok((await call(server, wire, { op: 'suspend', name: 'vm1' })).ok);
    const got = await call(server, wire, { op: 'get', name: 'vm1' });
    assert.equal(got.ok && got.result.status, 'suspended');
    // stdin wakes the paused VM first.
    assert.ok(
      (await call(server, wire, { op: 'stdin', session_id: sid, data: Buffer.from('resumed\n').toString('base64') }))
        .ok,
    );
    await until(() => wire.of(sid).some((f) => f.stream === 'exit'), 'session exit', HANG_GUARD);
    assert.equal(wire.text(sid), 'before\nafter resumed\n');
    const running = await call(server, wire, { op: 'get', name: 'vm1' });
    assert.equal(running.ok && running.result.status, 'running');

    // Daemon restart: stopAll syncs and stops the VM; a new backend boots the same disk.
    await backend.stopAll();
    backend = open();
    wire = new Wire();
    server = new ProtocolServer(backend, wire, captureLogger().logger);
    const parked = await call(server, wire, { op: 'get', name: 'vm1' });
    assert.equal(parked.ok && parked.result.status, 'suspended');
    const read = await call(server, wire, {
      op: 'exec',
      name: 'vm1',
      cmd: 'cat',
      args: ['/home/sprite/memory.txt'],
      timeout_ms: 60_000,
    });
    assert.equal(out(read), 'remembered');

    // Killing QEMU mid-command ends the session once, with 137 after a stderr note.
    const long = await call(server, wire, {
      op: 'spawn',
      name: 'vm1',
      cmd: 'bash',
      args: ['-c', 'echo working; sleep 300'],
    });
    assert.ok(long.ok);
    const lsid = String(long.result.session_id);
    await until(() => wire.text(lsid).includes('working'), 'long session output', HANG_GUARD);
    const pid = backend.vmmPid('vm1');
    assert.ok(pid !== undefined);
    process.kill(pid, 'SIGKILL');
    await until(() => wire.of(lsid).some((f) => f.stream === 'exit'), 'exit after the kill', HANG_GUARD);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(
      wire
        .of(lsid)
        .filter((f) => f.stream === 'exit')
        .map((f) => f.stream === 'exit' && f.code),
      [137],
    );
    assert.match(wire.text(lsid, 'stderr'), /agent connection dropped/);
    const after = await call(server, wire, { op: 'get', name: 'vm1' });
    assert.equal(after.ok && after.result.status, 'suspended');

    assert.ok((await call(server, wire, { op: 'destroy', name: 'vm1' })).ok);
    assert.ok(!existsSync(join(dir, 'root', 'vm1')));
  });
});
