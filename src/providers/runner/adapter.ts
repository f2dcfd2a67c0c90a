/**
 * The `runner` sandbox provider, composed of its parts: routes each sandbox name to its runner's
 * live connection and maps wire replies onto the contract. Never throws;
 * offline is transient. No checkpoints part.
 */
import type { Capability, Handle, Private, SandboxAdapter } from '../../sandbox/index.ts';
import { RunnerCore, type RunnerAdapterOptions } from './core.ts';
import { RunnerFiles } from './files.ts';
import type { RunnerHost } from './host.ts';
import { RunnerLifecycle } from './lifecycle.ts';
import { RunnerNetwork } from './network.ts';
import { RunnerProcesses } from './processes.ts';

export {
  EXEC_GRACE_MS,
  mapSandboxPath,
  pickRunner,
  type RunnerAdapterOptions,
  type RunnerCommandPrivate,
} from './core.ts';

export class RunnerAdapter implements SandboxAdapter {
  readonly provider = 'runner' as const;
  readonly lifecycle: RunnerLifecycle;
  readonly files: RunnerFiles;
  readonly processes: RunnerProcesses;
  readonly network: RunnerNetwork;
  readonly #core: RunnerCore;

  constructor(host: RunnerHost, opts: RunnerAdapterOptions = {}) {
    this.#core = new RunnerCore(host, opts);
    this.lifecycle = new RunnerLifecycle(this.#core);
    this.files = new RunnerFiles(this.#core, this.lifecycle);
    this.processes = new RunnerProcesses(this.#core);
    this.network = new RunnerNetwork(this.#core);
  }

  offered(handle?: Handle): ReadonlySet<Capability> {
    return this.#core.offered(handle);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return this.#core.buildHandle(name, priv);
  }
}
