/**
 * The Firecracker driver: spawn `firecracker --api-sock`, configure
 * the machine over its API in the documented order, start it; the guest link is hybrid vsock.
 */
import { join } from 'node:path';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import type { RunningVm, VmSpec, VmState, VmmDriver } from './driver.ts';
import { FirecrackerApi } from './firecracker-api.ts';
import { GUEST_PORT, dialHybridVsock } from './hybrid-vsock.ts';
import { removeStale, startVmm } from './vmm-process.ts';

export const API_SOCKET = 'firecracker.sock';
export const VSOCK_SOCKET = 'vsock.sock';
export const FIRECRACKER_LOG = 'firecracker.log';
/** Every VM gets CID 3: each has its own vsock socket on the host, so they never clash. */
const GUEST_CID = 3;
const API_READY_MS = 10_000;

export function bootArgs(spec: VmSpec): string {
  return ['console=ttyS0 reboot=k panic=1 pci=off', spec.net?.kernelArg].filter(Boolean).join(' ');
}

export class FirecrackerDriver implements VmmDriver {
  readonly kind = 'firecracker' as const;
  readonly #bin: string;

  constructor(bin: string) {
    this.#bin = bin;
  }

  async boot(spec: VmSpec): Promise<Result<RunningVm, string>> {
    const apiSock = join(spec.dir, API_SOCKET);
    const vsock = join(spec.dir, VSOCK_SOCKET);
    // Firecracker binds both paths and refuses an existing one; it never removes them itself.
    await removeStale([apiSock, vsock]);
    const vmm = await startVmm(this.#bin, ['--api-sock', apiSock], join(spec.dir, FIRECRACKER_LOG));
    if (vmm instanceof Error) return err(vmm.message);
    const api = new FirecrackerApi(apiSock);
    const fail = async (why: string): Promise<Result<RunningVm, string>> => {
      await vmm.stop(2000);
      await removeStale([apiSock, vsock]);
      return err(why);
    };

    const deadline = Date.now() + API_READY_MS;
    for (;;) {
      if (!vmm.alive())
        return fail(`firecracker exited before its API answered (see ${join(spec.dir, FIRECRACKER_LOG)})`);
      if ((await api.info(1000)).ok) break;
      if (Date.now() > deadline) return fail(`firecracker's API did not answer within ${API_READY_MS} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }

    const steps: Array<[string, unknown]> = [
      ['/machine-config', { vcpu_count: spec.vcpus, mem_size_mib: spec.memoryMib }],
      [
        '/boot-source',
        {
          kernel_image_path: spec.kernel,
          boot_args: bootArgs(spec),
          ...(spec.initrd ? { initrd_path: spec.initrd } : {}),
        },
      ],
      ['/drives/rootfs', { drive_id: 'rootfs', path_on_host: spec.disk, is_root_device: true, is_read_only: false }],
      ...(spec.net
        ? [
            [
              '/network-interfaces/eth0',
              { iface_id: 'eth0', host_dev_name: spec.net.tap, guest_mac: spec.net.mac },
            ] as [string, unknown],
          ]
        : []),
      // vsock_id is deprecated upstream; guest_cid and uds_path are all that is needed.
      ['/vsock', { guest_cid: GUEST_CID, uds_path: vsock }],
      ['/actions', { action_type: 'InstanceStart' }],
    ];
    for (const [path, body] of steps) {
      const r = await api.put(path, body);
      if (!r.ok) return fail(`firecracker refused the boot: ${r.error}`);
    }

    const vm: RunningVm = {
      get alive() {
        return vmm.alive();
      },
      pid: vmm.child.pid,
      exited: vmm.exited,
      // Firecracker writes the guest's ttyS0 to its own stdout.
      consoleLog: join(spec.dir, FIRECRACKER_LOG),
      async state(timeoutMs: number): Promise<Result<VmState, string>> {
        const info = await api.info(timeoutMs);
        if (!info.ok) return info;
        return ok(info.value.state === 'Running' ? 'running' : info.value.state === 'Paused' ? 'paused' : 'other');
      },
      pause: (timeoutMs: number) => api.patch('/vm', { state: 'Paused' }, timeoutMs),
      resume: (timeoutMs: number) => api.patch('/vm', { state: 'Resumed' }, timeoutMs),
      dial: (timeoutMs: number) => dialHybridVsock(vsock, GUEST_PORT, timeoutMs),
      async stop(graceMs: number): Promise<void> {
        await vmm.stop(graceMs);
        await removeStale([apiSock, vsock]);
      },
    };
    return ok(vm);
  }
}
