/**
 * The QEMU driver (`--vmm qemu`): `qemu-system-x86_64 -M q35` (or `microvm`) under software emulation, for
 * Linux hosts with QEMU but no Firecracker. The guest link is a virtio-serial port; pause and
 * resume go through QMP. Everything else is the shared VM backend.
 */
import { createConnection } from 'node:net';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { z } from 'zod';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import type { RunningVm, VmSpec, VmState, VmmDriver } from './driver.ts';
import { qmp } from './qmp.ts';
import { removeStale, startVmm } from './vmm-process.ts';

export const QMP_SOCKET = 'qmp.sock';
export const AGENT_SOCKET = 'agent.sock';
export const QEMU_LOG = 'qemu.log';
export const CONSOLE_LOG = 'console.log';
/** The virtio-serial port name; the guest sees /dev/virtio-ports/fountain. */
export const PORT_NAME = 'fountain';
const QMP_READY_MS = 10_000;

const statusSchema = z.object({ status: z.string(), running: z.boolean().optional() });

export type QemuMachine = 'microvm' | 'q35';

export function qemuArgs(spec: VmSpec, machine: QemuMachine = 'q35', accel = 'tcg'): string[] {
  // microvm puts virtio on MMIO; q35 on PCI. Everything else is the same.
  const bus = machine === 'microvm' ? 'device' : 'pci';
  const append = [
    'console=ttyS0 panic=-1 loglevel=4 reboot=t root=/dev/vda rw fountain.link=serial',
    spec.net?.kernelArg,
  ]
    .filter(Boolean)
    .join(' ');
  return [
    ...[
      '-accel',
      accel,
      '-cpu',
      accel === 'tcg' ? 'max' : 'host',
      '-m',
      String(spec.memoryMib),
      '-smp',
      String(spec.vcpus),
    ],
    ...['-display', 'none', '-monitor', 'none', '-nodefaults', '-no-reboot'],
    // Never -serial stdio: with stdin at EOF a run can hang.
    ...['-serial', `file:${join(spec.dir, CONSOLE_LOG)}`],
    ...['-M', machine, '-kernel', spec.kernel, ...(spec.initrd ? ['-initrd', spec.initrd] : []), '-append', append],
    ...[
      '-drive',
      `id=root,file=${spec.disk},format=raw,if=none,cache=writeback`,
      '-device',
      `virtio-blk-${bus},drive=root`,
    ],
    ...['-chardev', `socket,id=agent,path=${join(spec.dir, AGENT_SOCKET)},server=on,wait=off`],
    ...['-device', `virtio-serial-${bus}`, '-device', `virtserialport,chardev=agent,name=${PORT_NAME}`],
    ...['-qmp', `unix:${join(spec.dir, QMP_SOCKET)},server=on,wait=off`],
    ...(spec.net
      ? [
          '-netdev',
          `tap,id=net0,ifname=${spec.net.tap},script=no,downscript=no`,
          '-device',
          `virtio-net-${bus},netdev=net0,mac=${spec.net.mac}`,
        ]
      : []),
  ];
}

function connectUnix(path: string, timeoutMs: number): Promise<Result<Socket, string>> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    const timer = setTimeout(() => {
      s.destroy();
      resolve(err(`no connection to ${path} within ${timeoutMs} ms`));
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      resolve(ok(s));
    });
    s.once('error', (e) => {
      clearTimeout(timer);
      resolve(
        err(
          `the guest agent's virtio-serial port is not reachable (${e.message}); the base rootfs must start \`fountain runner-guest\` at boot`,
        ),
      );
    });
  });
}

export class QemuDriver implements VmmDriver {
  readonly kind = 'qemu' as const;
  readonly #bin: string;
  readonly #machine: QemuMachine;

  constructor(bin: string, machine: QemuMachine = 'q35') {
    this.#bin = bin;
    this.#machine = machine;
  }

  async boot(spec: VmSpec): Promise<Result<RunningVm, string>> {
    const qmpSock = join(spec.dir, QMP_SOCKET);
    const agentSock = join(spec.dir, AGENT_SOCKET);
    // A killed QEMU leaves its socket files; a stale path refuses connections.
    await removeStale([qmpSock, agentSock]);
    const vmm = await startVmm(this.#bin, qemuArgs(spec, this.#machine), join(spec.dir, QEMU_LOG));
    if (vmm instanceof Error) return err(vmm.message);
    const deadline = Date.now() + QMP_READY_MS;
    for (;;) {
      if (!vmm.alive()) return err(`qemu exited during start (see ${join(spec.dir, QEMU_LOG)})`);
      if ((await qmp(qmpSock, 'query-status', undefined, 1000)).ok) break;
      if (Date.now() > deadline) {
        await vmm.stop(2000);
        return err(`qemu's QMP socket did not answer within ${QMP_READY_MS} ms`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const vm: RunningVm = {
      get alive() {
        return vmm.alive();
      },
      pid: vmm.child.pid,
      exited: vmm.exited,
      consoleLog: join(spec.dir, CONSOLE_LOG),
      async state(timeoutMs: number): Promise<Result<VmState, string>> {
        const r = await qmp(qmpSock, 'query-status', undefined, timeoutMs);
        if (!r.ok) return r;
        const s = statusSchema.safeParse(r.value);
        if (!s.success) return err(`QMP query-status: unexpected reply ${JSON.stringify(r.value).slice(0, 100)}`);
        return ok(s.data.status === 'running' ? 'running' : s.data.status === 'paused' ? 'paused' : 'other');
      },
      async pause(timeoutMs: number): Promise<Result<void, string>> {
        const r = await qmp(qmpSock, 'stop', undefined, timeoutMs);
        return r.ok ? ok(undefined) : r;
      },
      async resume(timeoutMs: number): Promise<Result<void, string>> {
        const r = await qmp(qmpSock, 'cont', undefined, timeoutMs);
        return r.ok ? ok(undefined) : r;
      },
      dial: (timeoutMs: number) => connectUnix(agentSock, timeoutMs),
      async stop(graceMs: number): Promise<void> {
        await vmm.stop(graceMs);
        await removeStale([qmpSock, agentSock]);
      },
    };
    return ok(vm);
  }
}
