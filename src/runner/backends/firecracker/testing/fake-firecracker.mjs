#!/usr/bin/env node
/**
 * A stand-in for the `firecracker` executable, for tests on machines without KVM or Firecracker:
 * its API socket (HTTP/1.1, JSON, the endpoints the backend uses, states Not started / Running /
 * Paused, pre- and post-boot rules, fault_message errors, socket files never unlinked) and a
 * hybrid-vsock socket that answers `CONNECT 1024` by bridging to a real `fountain runner-guest`
 * process, which InstanceStart starts as the "guest". Pause stops the guest with SIGSTOP.
 *
 * Environment: FAKE_FC_GUEST_CMD   JSON argv of the guest agent (`--listen`/`--root` are appended);
 *              FAKE_FC_GUEST=silent boot without starting any agent (a rootfs that lacks one), and
 *              print a guest console line saying so.
 * Every API call is printed to stdout as one JSON line {"api": "PUT /x", "body": {...}}.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createConnection, createServer as createNetServer } from 'node:net';
import { dirname, join } from 'node:path';

const argv = process.argv.slice(2);
const apiSock = argv[argv.indexOf('--api-sock') + 1];
if (!argv.includes('--api-sock') || !apiSock) {
  process.stderr.write('fake-firecracker: --api-sock is required\n');
  process.exit(1);
}
const dir = dirname(apiSock);
const guestPidFile = join(dir, 'fake-guest.pid');

// A VM cannot outlive its VMM: a guest left by a killed predecessor dies now.
function killStaleGuest() {
  try {
    const pid = Number(readFileSync(guestPidFile, 'utf8'));
    if (pid > 0) process.kill(-pid, 'SIGKILL');
  } catch {
    // none
  }
  rmSync(guestPidFile, { force: true });
}
killStaleGuest();

let state = 'Not started';
const config = { machine: null, boot: null, drives: {}, nets: {}, vsock: null };
let guest = null;
let guestSock = null;
let vsockServer = null;
let nextHostPort = 1 << 30;

const log = (api, body) => process.stdout.write(`${JSON.stringify({ api, body })}\n`);

function fault(res, status, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ fault_message: message }));
}
const noContent = (res) => res.writeHead(204).end();
const preBootOnly = (res) => {
  if (state === 'Not started') return true;
  fault(res, 400, 'The requested operation is not supported after starting the microVM.');
  return false;
};
const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const int = (v) => Number.isInteger(v);

function startGuest() {
  if (process.env.FAKE_FC_GUEST === 'silent') {
    // Firecracker copies the guest's serial console to its stdout; this is what a broken init shows.
    process.stdout.write('fake guest console: /sbin/init: fountain: not found\n');
    return;
  }
  const cmd = JSON.parse(process.env.FAKE_FC_GUEST_CMD ?? 'null');
  if (!Array.isArray(cmd) || cmd.length === 0) {
    process.stderr.write('fake-firecracker: FAKE_FC_GUEST_CMD is not set; the guest has no agent\n');
    return;
  }
  const root = config.drives.rootfs ? `${config.drives.rootfs.path_on_host}.guest-home` : join(dir, 'guest-home');
  guestSock = join(dir, 'fake-guest.sock');
  guest = spawn(cmd[0], [...cmd.slice(1), '--listen', guestSock, '--root', root], {
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, FOUNTAIN_LOG_FORMAT: 'json' },
  });
  writeFileSync(guestPidFile, String(guest.pid));
  guest.once('exit', () => {
    guest = null;
  });
}

function signalGuest(sig) {
  if (guest?.pid) {
    try {
      process.kill(-guest.pid, sig);
    } catch {
      // gone
    }
  }
}

function bindVsock(path, res) {
  if (existsSync(path)) {
    fault(
      res,
      400,
      `Cannot create backend for vsock device: UnixBind(Os { code: 98, kind: AddrInUse, message: "Address in use" })`,
    );
    return false;
  }
  vsockServer?.close();
  vsockServer = createNetServer((client) => {
    let buf = Buffer.alloc(0);
    let first = true;
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const nl = buf.indexOf(10);
      // The muxer reads the request line from one non-blocking read: a split line is dropped.
      if (nl === -1 || (first && nl === -1)) return client.destroy();
      first = false;
      client.off('data', onData);
      client.pause();
      const m = /^connect (\d+)$/i.exec(buf.subarray(0, nl).toString());
      const rest = buf.subarray(nl + 1);
      if (!m || state === 'Not started' || !guestSock || Number(m[1]) !== 1024) return client.end();
      const upstream = createConnection(guestSock);
      upstream.once('error', () => client.destroy());
      upstream.once('connect', () => {
        client.write(`OK ${nextHostPort++}\n`);
        if (rest.length) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      client.once('error', () => upstream.destroy());
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    };
    client.on('data', onData);
    client.on('error', () => {});
  });
  vsockServer.listen(path);
  return true;
}

async function handle(req, res, body) {
  const route = `${req.method} ${req.url}`;
  log(route, body);
  if (route === 'GET /') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(
      JSON.stringify({ app_name: 'Firecracker', id: 'anonymous-instance', state, vmm_version: '1.17.0-fake' }),
    );
  }
  if (req.method === 'PUT' && req.url === '/machine-config') {
    if (!preBootOnly(res)) return;
    if (!isObj(body) || !int(body.vcpu_count) || !int(body.mem_size_mib))
      return fault(res, 400, 'vcpu_count and mem_size_mib are required');
    if (body.vcpu_count < 1 || body.vcpu_count > 32 || (body.vcpu_count > 1 && body.vcpu_count % 2 !== 0))
      return fault(res, 400, 'The vCPU number is invalid!');
    config.machine = body;
    return noContent(res);
  }
  if (req.method === 'PUT' && req.url === '/boot-source') {
    if (!preBootOnly(res)) return;
    if (!isObj(body) || typeof body.kernel_image_path !== 'string')
      return fault(res, 400, 'kernel_image_path is required');
    if (!existsSync(body.kernel_image_path))
      return fault(res, 400, `The kernel file cannot be opened: No such file or directory (os error 2)`);
    if (body.initrd_path !== undefined && !existsSync(body.initrd_path))
      return fault(res, 400, 'The initrd file cannot be opened');
    config.boot = body;
    return noContent(res);
  }
  const drive = /^\/drives\/([A-Za-z0-9_]+)$/.exec(req.url);
  if (req.method === 'PUT' && drive) {
    if (!preBootOnly(res)) return;
    if (!isObj(body) || body.drive_id !== drive[1] || typeof body.is_root_device !== 'boolean')
      return fault(res, 400, 'drive_id must match the path and is_root_device is required');
    if (typeof body.path_on_host !== 'string' || !existsSync(body.path_on_host))
      return fault(res, 400, 'Unable to open the block device backing file');
    config.drives[drive[1]] = body;
    return noContent(res);
  }
  const net = /^\/network-interfaces\/([A-Za-z0-9_]+)$/.exec(req.url);
  if (req.method === 'PUT' && net) {
    if (!preBootOnly(res)) return;
    if (!isObj(body) || body.iface_id !== net[1] || typeof body.host_dev_name !== 'string')
      return fault(res, 400, 'iface_id must match the path and host_dev_name is required');
    if (body.guest_mac !== undefined && !/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(body.guest_mac))
      return fault(res, 400, 'Invalid guest MAC');
    config.nets[net[1]] = body;
    return noContent(res);
  }
  if (req.method === 'PUT' && req.url === '/vsock') {
    if (!preBootOnly(res)) return;
    if (!isObj(body) || !int(body.guest_cid) || body.guest_cid < 3 || typeof body.uds_path !== 'string')
      return fault(res, 400, 'guest_cid (>= 3) and uds_path are required');
    if (!bindVsock(body.uds_path, res)) return;
    config.vsock = body;
    return noContent(res);
  }
  if (req.method === 'PUT' && req.url === '/actions') {
    if (!isObj(body)) return fault(res, 400, 'action_type is required');
    if (body.action_type === 'InstanceStart') {
      if (state !== 'Not started') return fault(res, 400, 'The microVM is already running.');
      if (!config.boot) return fault(res, 400, 'Cannot start microvm without kernel configuration.');
      if (!Object.values(config.drives).some((d) => d.is_root_device))
        return fault(res, 400, 'Cannot start microvm without a root device.');
      state = 'Running';
      startGuest();
      return noContent(res);
    }
    if (body.action_type === 'SendCtrlAltDel') {
      if (state === 'Not started') return fault(res, 400, 'The microVM is not running.');
      noContent(res);
      return shutdown(0);
    }
    if (body.action_type === 'FlushMetrics') return noContent(res);
    return fault(res, 400, `unknown action_type ${JSON.stringify(body.action_type)}`);
  }
  if (req.method === 'PATCH' && req.url === '/vm') {
    if (state === 'Not started')
      return fault(res, 400, 'The requested operation is not supported before starting the microVM.');
    if (!isObj(body) || (body.state !== 'Paused' && body.state !== 'Resumed'))
      return fault(res, 400, 'state must be Paused or Resumed');
    if (body.state === 'Paused') {
      signalGuest('SIGSTOP');
      state = 'Paused';
    } else {
      signalGuest('SIGCONT');
      state = 'Running';
    }
    return noContent(res);
  }
  return fault(res, 400, `Invalid request method and/or path: ${req.method} ${req.url}`);
}

if (existsSync(apiSock)) {
  process.stderr.write(`fake-firecracker: Failed to open the API socket at ${apiSock}: Address in use\n`);
  process.exit(1);
}
const api = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString();
    let body;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      return fault(res, 400, 'Invalid JSON body');
    }
    void handle(req, res, body);
  });
});
api.listen(apiSock);

// Like the real VMM, the socket files stay behind after exit.
function shutdown(code) {
  signalGuest('SIGCONT');
  signalGuest('SIGKILL');
  rmSync(guestPidFile, { force: true });
  process.exit(code);
}
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
