/**
 * The seam between the VM backend and a virtual machine monitor: Firecracker (API socket, hybrid
 * vsock) or QEMU `-M microvm` (QMP, virtio-serial). Everything above it is shared.
 */
import type { Duplex } from 'node:stream';
import type { Result } from '../../../sandbox/result.ts';

export interface VmSpec {
  /** The sandbox directory; sockets and the VMM log live here. */
  readonly dir: string;
  readonly kernel: string;
  readonly initrd?: string;
  readonly disk: string;
  readonly vcpus: number;
  readonly memoryMib: number;
  /** Null when the VM has no network device (a QEMU host without a bridge). */
  readonly net: { readonly tap: string; readonly mac: string; readonly kernelArg: string } | null;
}

export type VmState = 'running' | 'paused' | 'other';

export interface RunningVm {
  /** False once the VMM process has exited. */
  readonly alive: boolean;
  /** The VMM's process id (its process group), for logs and operators. */
  readonly pid: number | undefined;
  readonly exited: Promise<void>;
  /** The file the guest's serial console (kernel, init, the agent's log) is written to. */
  readonly consoleLog: string;
  state(timeoutMs: number): Promise<Result<VmState, string>>;
  pause(timeoutMs: number): Promise<Result<void, string>>;
  resume(timeoutMs: number): Promise<Result<void, string>>;
  /** One attempt at a byte stream to the guest agent; the link retries. */
  dial(timeoutMs: number): Promise<Result<Duplex, string>>;
  /** SIGTERM to the VMM's group, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs: number): Promise<void>;
}

export interface VmmDriver {
  readonly kind: 'firecracker' | 'qemu';
  /** Starts the VMM and the guest; the guest agent may not be up yet when this resolves. */
  boot(spec: VmSpec): Promise<Result<RunningVm, string>>;
}
