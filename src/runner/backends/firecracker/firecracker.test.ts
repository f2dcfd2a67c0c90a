import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeFrame } from '../../../wire/index.ts';
import type { Reply, StreamFrame } from '../../../wire/index.ts';
import { ProtocolServer } from '../../protocol-server.ts';
import type { FrameTransport } from '../../protocol-server.ts';
import { captureLogger, until } from '../../testing.ts';
import { FirecrackerDriver } from './firecracker-driver.ts';
import { checkHost } from './host-checks.ts';
import type { HostCheckInput } from './host-checks.ts';
import { VmBackend } from './index.ts';
import type { VmBackendOptions } from './index.ts';
import { parseSubnet, tapName } from './network.ts';

const here = fileURLToPath(new URL('.', import.meta.url));
const repo = resolve(here, '../../../..');
const FAKE = join(here, 'testing', 'fake-firecracker.mjs');

/** The platform's side of the daemon: every frame the ProtocolServer wrote, in wire order. */
class Wire implements FrameTransport {
  readonly frames: Array<Reply | StreamFrame> = [];
  open = true;
  send(frame: Buffer): void {
    const text = frame.toString('utf8');
    const d = decodeFrame(text);
    if (d.kind === 'reply') this.frames.push(d.reply);
    else if (d.kind === 'stream') this.frames.push(d.frame);
    else throw new Error(`undecodable frame ${text}`);
  }
  drained(): Promise<void> {
    return Promise.resolve();
  }
  reply(id: number): Promise<Reply> {
    return until(() => this.frames.find((f): f is Reply => 'ok' in f && f.id === id), `reply ${id}`, 60_000);
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

let nextId = 1;
async function call(server: ProtocolServer, wire: Wire, req: Record<string, unknown>): Promise<Reply & { id: number }> {
  const id = nextId++;
  server.receive(JSON.stringify({ ...req, id }));
  return (await wire.reply(id)) as Reply & { id: number };
}
const b64 = (s: string) => Buffer.from(s).toString('base64');
const apiCalls = (dir: string) =>
  readFileSync(join(dir, 'firecracker.log'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{"api"'))
    .map((l) => JSON.parse(l) as { api: string; body?: Record<string, unknown> });
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('microVM backend with the fake firecracker', () => {
  let dir: string;
  let root: string;
  let kernel: string;
  let rootfs: string;
  let netns: string | null = null;
  let backend: VmBackend;
  let wire: Wire;
  let server: ProtocolServer;
  const backends: VmBackend[] = [];
  const subnet = parseSubnet('10.61.0.0/24');
  assert.ok(subnet.ok);

  const open = (over: Partial<VmBackendOptions> = {}) => {
    const b = new VmBackend({
      root,
      logger: captureLogger().logger,
      driver: new FirecrackerDriver(FAKE),
      kernel,
      rootfs,
      vcpus: 2,
      memoryMib: 256,
      bridge: netns ? 'fcbr0' : null,
      subnet: subnet.value,
      ...(netns ? { ip: { argv: ['ip', '-n', netns] } } : {}),
      timings: { bootTimeoutMs: 30_000, stopGraceMs: 2000 },
      ...over,
    });
    backends.push(b);
    return b;
  };

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-fc-')));
    root = join(dir, 'root');
    kernel = join(dir, 'vmlinux');
    rootfs = join(dir, 'rootfs.ext4');
    writeFileSync(kernel, 'not really a kernel');
    writeFileSync(rootfs, Buffer.alloc(64 * 1024, 7));
    // Taps live in a network namespace the test owns, on a bridge with no address: no traffic leaves it.
    const ns = `fountain-fc-${process.pid}`;
    try {
      execFileSync('ip', ['netns', 'add', ns], { stdio: 'ignore' });
      execFileSync('ip', ['-n', ns, 'link', 'add', 'fcbr0', 'type', 'bridge'], { stdio: 'ignore' });
      netns = ns;
    } catch {
      netns = null;
    }
    process.env.FAKE_FC_GUEST_CMD = JSON.stringify([
      process.execPath,
      '--import',
      'tsx',
      join(repo, 'src/cli/main.ts'),
      'runner-guest',
      '--log-level',
      'warn',
    ]);
    backend = open();
    wire = new Wire();
    server = new ProtocolServer(backend, wire, captureLogger().logger, {});
  });

  after(async () => {
    for (const b of backends) await b.stopAll();
    if (netns) execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
    // A fake killed by a test leaves its guest for the next fake to reap; reap it here instead.
    for (const name of ['a', 'killed', 'silent']) {
      try {
        process.kill(-Number(readFileSync(join(root, name, 'fake-guest.pid'), 'utf8')), 'SIGKILL');
      } catch {
        // none
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('boots through the API in order, with a private disk, vm.json and a tap on the bridge', async () => {
    const r = await call(server, wire, { op: 'create', name: 'a' });
    assert.deepEqual(r, { id: r.id, ok: true, result: {} });
    const sbx = join(root, 'a');
    const calls = apiCalls(sbx).filter((c) => c.api !== 'GET /');
    assert.deepEqual(
      calls.map((c) => c.api),
      [
        'PUT /machine-config',
        'PUT /boot-source',
        'PUT /drives/rootfs',
        ...(netns ? ['PUT /network-interfaces/eth0'] : []),
        'PUT /vsock',
        'PUT /actions',
      ],
    );
    assert.equal(apiCalls(sbx)[0]?.api, 'GET /');
    assert.deepEqual(calls[0]?.body, { vcpu_count: 2, mem_size_mib: 256 });
    assert.equal(calls[1]?.body?.kernel_image_path, kernel);
    assert.match(String(calls[1]?.body?.boot_args), /^console=ttyS0 reboot=k panic=1 pci=off/);
    assert.deepEqual(calls[2]?.body, {
      drive_id: 'rootfs',
      path_on_host: join(sbx, 'rootfs.ext4'),
      is_root_device: true,
      is_read_only: false,
    });
    assert.deepEqual(calls.at(-2)?.body, { guest_cid: 3, uds_path: join(sbx, 'vsock.sock') });
    assert.deepEqual(calls.at(-1)?.body, { action_type: 'InstanceStart' });
    assert.deepEqual(readFileSync(join(sbx, 'rootfs.ext4')), readFileSync(rootfs));
    assert.ok(!existsSync(join(sbx, 'rootfs.ext4.partial')));
    if (netns) {
      const vm = JSON.parse(readFileSync(join(sbx, 'vm.json'), 'utf8')) as Record<string, string>;
      assert.deepEqual(vm, { tap: tapName('a'), ip: '10.61.0.2', mac: '02:fc:0a:3d:00:02' });
      assert.match(String(calls[1]?.body?.boot_args), / ip=10\.61\.0\.2::10\.61\.0\.1:255\.255\.255\.0::eth0:off$/);
      assert.deepEqual(calls[3]?.body, { iface_id: 'eth0', host_dev_name: vm.tap, guest_mac: vm.mac });
      assert.match(execFileSync('ip', ['-n', netns, 'link', 'show', 'dev', vm.tap!]).toString(), /master fcbr0/);
    }
    const got = await call(server, wire, { op: 'get', name: 'a' });
    assert.deepEqual(got.ok && got.result, { status: 'running', path: sbx });
  });

  it('never lets a replay pass its reply, and relabels replays with the platform id', async () => {
    const spawned = await call(server, wire, {
      op: 'spawn',
      name: 'a',
      cmd: 'sh',
      args: ['-c', 'echo one; echo two; echo three'],
      stdin: false,
    });
    assert.ok(spawned.ok);
    const sid = String(spawned.result.session_id);
    await until(() => wire.of(sid).some((f) => f.stream === 'exit'), 'exit', 30_000);
    const replyAt = wire.frames.indexOf(spawned);
    const firstFrame = wire.frames.findIndex((f) => 'stream' in f && f.session_id === sid);
    assert.ok(replyAt < firstFrame, 'the reply is on the wire before any frame of its session');
    assert.equal(wire.text(sid), 'one\ntwo\nthree\n');
    for (const f of wire.of(sid)) assert.ok(f.replay_for === undefined || f.replay_for === spawned.id);

    const attached = await call(server, wire, { op: 'attach', name: 'a', session_id: sid });
    assert.ok(attached.ok);
    await until(() => wire.of(sid).filter((f) => f.stream === 'exit').length === 2, 'replayed exit', 30_000);
    const replay = wire.frames
      .slice(wire.frames.indexOf(attached) + 1)
      .filter((f): f is StreamFrame => 'stream' in f && f.session_id === sid);
    assert.ok(replay.length >= 2 && replay.every((f) => f.replay_for === attached.id));
    assert.ok(wire.frames.indexOf(attached) < wire.frames.indexOf(replay[0]!));
  });

  it('forwards files, exec and stdin to the guest, whose one sandbox is /home/sprite', async () => {
    assert.ok(
      (
        await call(server, wire, {
          op: 'write_file',
          name: 'a',
          path: '/home/sprite/notes.txt',
          data: b64('kept'),
          mode: 0o600,
        })
      ).ok,
    );
    const ex = await call(server, wire, {
      op: 'exec',
      name: 'a',
      cmd: 'sh',
      args: ['-c', 'cat ~/notes.txt; echo " $HOME"'],
      timeout_ms: 20_000,
    });
    assert.ok(ex.ok);
    assert.match(Buffer.from(String(ex.result.output), 'base64').toString(), /^kept .*\/sprite\n$/);
    const sp = await call(server, wire, { op: 'spawn', name: 'a', cmd: 'cat', args: [], stdin: true });
    assert.ok(sp.ok);
    const sid = String(sp.result.session_id);
    // stdin carries only the session: the daemon finds the VM through its session map.
    assert.ok((await call(server, wire, { op: 'stdin', session_id: sid, data: b64('echoed\n') })).ok);
    assert.ok((await call(server, wire, { op: 'stdin_close', session_id: sid })).ok);
    await until(() => wire.of(sid).some((f) => f.stream === 'exit'), 'cat exit', 30_000);
    assert.equal(wire.text(sid), 'echoed\n');
    const unknown = await call(server, wire, { op: 'stdin', session_id: 's-0-0', data: b64('x') });
    assert.equal(!unknown.ok && unknown.error, 'not_found');
    const listed = await call(server, wire, { op: 'list_sessions', name: 'a' });
    assert.ok(listed.ok && Array.isArray(listed.result.sessions) && listed.result.sessions.length >= 2);
  });

  it('suspend pauses the VM, get reads it as suspended, and any request wakes it', async () => {
    const sbx = join(root, 'a');
    assert.ok((await call(server, wire, { op: 'suspend', name: 'a' })).ok);
    assert.equal(apiCalls(sbx).at(-1)?.api, 'PATCH /vm');
    assert.deepEqual(apiCalls(sbx).at(-1)?.body, { state: 'Paused' });
    const got = await call(server, wire, { op: 'get', name: 'a' });
    assert.equal(got.ok && got.result.status, 'suspended');
    const ex = await call(server, wire, { op: 'exec', name: 'a', cmd: 'cat', args: ['/home/sprite/notes.txt'] });
    assert.equal(ex.ok && Buffer.from(String(ex.result.output), 'base64').toString(), 'kept');
    assert.ok(apiCalls(sbx).some((c) => c.api === 'PATCH /vm' && c.body?.state === 'Resumed'));
    const again = await call(server, wire, { op: 'get', name: 'a' });
    assert.equal(again.ok && again.result.status, 'running');
    assert.ok((await call(server, wire, { op: 'resume', name: 'a' })).ok);
  });

  it('a VM killed mid-command ends its session with one stderr note and exit 137; pending calls fail unavailable', async () => {
    assert.ok((await call(server, wire, { op: 'create', name: 'killed' })).ok);
    const sp = await call(server, wire, {
      op: 'spawn',
      name: 'killed',
      cmd: 'sh',
      args: ['-c', 'echo started; sleep 20'],
      stdin: false,
    });
    assert.ok(sp.ok);
    const sid = String(sp.result.session_id);
    await until(() => wire.text(sid).includes('started'), 'first output', 30_000);
    const pendingId = nextId++;
    server.receive(JSON.stringify({ id: pendingId, op: 'exec', name: 'killed', cmd: 'sleep', args: ['20'] }));
    await new Promise((r) => setTimeout(r, 300));
    const pid = backend.vmmPid('killed');
    assert.ok(pid !== undefined);
    process.kill(pid, 'SIGKILL');
    const pending = await wire.reply(pendingId);
    assert.equal(!pending.ok && pending.error, 'unavailable');
    await until(() => wire.of(sid).some((f) => f.stream === 'exit'), 'synthesized exit');
    const got = await call(server, wire, { op: 'get', name: 'killed' });
    assert.equal(got.ok && got.result.status, 'suspended');
    const exits = wire.of(sid).filter((f) => f.stream === 'exit');
    assert.deepEqual(
      exits.map((f) => f.stream === 'exit' && f.code),
      [137],
    );
    assert.match(wire.text(sid, 'stderr'), /fountain runner: the microVM's agent connection dropped/);
    const last = wire.of(sid).at(-1);
    assert.equal(last?.stream, 'exit');
    // The next request boots the VM again on the same disk.
    const ex = await call(server, wire, { op: 'exec', name: 'killed', cmd: 'true', args: [] });
    assert.ok(ex.ok && ex.result.code === 0);
    assert.equal(wire.of(sid).filter((f) => f.stream === 'exit').length, 1);
    assert.ok(!alive(pid));
  });

  it('refuses a VM that boots but whose agent never answers, naming runner-guest and quoting the guest console', async () => {
    process.env.FAKE_FC_GUEST = 'silent';
    try {
      const b = open({ timings: { bootTimeoutMs: 1500, stopGraceMs: 1000 } });
      const s = new ProtocolServer(b, wire, captureLogger().logger);
      const r = await call(s, wire, { op: 'create', name: 'silent' });
      assert.equal(!r.ok && r.error, 'unavailable');
      assert.match(!r.ok ? String(r.detail) : '', /never answered.*fountain runner-guest/);
      assert.match(
        !r.ok ? String(r.detail) : '',
        /guest console is in .*firecracker\.log, and ends:\n(.*\n)*fake guest console: \/sbin\/init: fountain: not found/,
      );
      assert.equal(b.vmmPid('silent'), undefined);
      const got = await call(s, wire, { op: 'get', name: 'silent' });
      assert.equal(got.ok && got.result.status, 'suspended');
    } finally {
      delete process.env.FAKE_FC_GUEST;
    }
  });

  it('a restarted daemon rebuilds the same VM on the same disk; destroy stops it quietly and removes everything', async () => {
    const sbx = join(root, 'a');
    const vmBefore = existsSync(join(sbx, 'vm.json')) ? readFileSync(join(sbx, 'vm.json'), 'utf8') : null;
    const sp = await call(server, wire, { op: 'spawn', name: 'a', cmd: 'sleep', args: ['20'] });
    assert.ok(sp.ok);
    const sid = String(sp.result.session_id);
    await backend.stopAll();
    const restarted = open();
    const w2 = new Wire();
    const s2 = new ProtocolServer(restarted, w2, captureLogger().logger);
    const got = await call(s2, w2, { op: 'get', name: 'a' });
    assert.equal(got.ok && got.result.status, 'suspended');
    const ex = await call(s2, w2, { op: 'exec', name: 'a', cmd: 'cat', args: ['/home/sprite/notes.txt'] });
    assert.equal(ex.ok && Buffer.from(String(ex.result.output), 'base64').toString(), 'kept');
    if (vmBefore !== null) assert.equal(readFileSync(join(sbx, 'vm.json'), 'utf8'), vmBefore);

    const sp2 = await call(s2, w2, { op: 'spawn', name: 'a', cmd: 'sh', args: ['-c', 'echo up; sleep 20'] });
    assert.ok(sp2.ok);
    const sid2 = String(sp2.result.session_id);
    await until(() => w2.text(sid2).includes('up'), 'output');
    assert.ok((await call(s2, w2, { op: 'destroy', name: 'a' })).ok);
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(
      w2.of(sid2).filter((f) => f.stream !== 'stdout'),
      [],
      'a deliberate stop synthesizes nothing',
    );
    assert.ok(!existsSync(sbx));
    if (netns)
      assert.throws(() => execFileSync('ip', ['-n', netns!, 'link', 'show', 'dev', tapName('a')], { stdio: 'ignore' }));
    const gone = await call(s2, w2, { op: 'get', name: 'a' });
    assert.equal(!gone.ok && gone.error, 'not_found');
    assert.ok((await call(s2, w2, { op: 'destroy', name: 'a' })).ok);
    assert.ok(!wire.of(sid).some((f) => f.stream === 'exit' && f.code === 137));
  });
});

describe('microVM startup checks', () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-fc-checks-')));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const kernel = join(dir, 'vmlinux');
  const rootfs = join(dir, 'rootfs.ext4');
  const kvm = join(dir, 'kvm');
  const status = join(dir, 'status');
  writeFileSync(kernel, 'k');
  writeFileSync(rootfs, 'r');
  writeFileSync(kvm, '');
  writeFileSync(status, 'Name:\tx\nCapEff:\t000001ffffffffff\n');
  const base: HostCheckInput = {
    vmm: 'firecracker',
    bridge: 'lo',
    subnetError: null,
    kernel,
    rootfs,
    initrd: undefined,
    bin: FAKE,
    root: join(dir, 'root'),
    ip: { argv: ['ip'] },
    kvmDevice: kvm,
    procStatus: status,
  };
  const refusal = async (over: Partial<HostCheckInput>) => {
    const r = await checkHost({ ...base, ...over });
    return r.ok ? null : r.error;
  };

  it('passes on a host that has everything and names each missing part otherwise', async () => {
    assert.equal(await refusal({}), null);
    assert.match(String(await refusal({ bridge: null })), /--bridge is required/);
    assert.match(String(await refusal({ subnetError: '--subnet must be an IPv4 CIDR' })), /--subnet/);
    assert.match(String(await refusal({ bridge: 'fcbr-absent' })), /bridge fcbr-absent does not exist/);
    assert.match(String(await refusal({ kernel: undefined })), /--fc-kernel is required/);
    assert.match(String(await refusal({ rootfs: join(dir, 'nope') })), /--fc-rootfs .* does not exist/);
    assert.match(String(await refusal({ kvmDevice: join(dir, 'no-kvm') })), /no-kvm is missing.*KVM/);
    assert.match(String(await refusal({ bin: 'firecracker-absent-here' })), /firecracker executable was not found/);
    writeFileSync(status, 'CapEff:\t0000000000000000\n');
    assert.match(String(await refusal({})), /CAP_NET_ADMIN/);
    assert.equal(await refusal({ vmm: 'qemu', bridge: null, kvmDevice: join(dir, 'no-kvm') }), null);
  });
});
