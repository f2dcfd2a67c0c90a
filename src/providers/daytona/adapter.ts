/**
 * The Daytona sandbox adapter, composed of its parts: native names (adopt on 409), asynchronous
 * lifecycle waits, session commands behind the journaling shim and an HTTP-polled journal.
 */
import type { Handle, Private, SandboxAdapter } from '../../sandbox/index.ts';
import type { DaytonaOptions } from './config.ts';
import { DaytonaCore } from './core.ts';
import { DaytonaFiles } from './files.ts';
import { DaytonaLifecycle } from './lifecycle.ts';
import { DaytonaNetwork } from './network.ts';
import { DaytonaProcesses } from './processes.ts';

export { FOUNTAIN_LABELS, networkSettingsFor, type DaytonaHandlePrivate } from './core.ts';

/** No checkpoints part (Daytona snapshots are not wired up), no tty. */
export class DaytonaAdapter implements SandboxAdapter {
  readonly provider = 'daytona' as const;
  readonly lifecycle: DaytonaLifecycle;
  readonly files: DaytonaFiles;
  readonly processes: DaytonaProcesses;
  readonly network: DaytonaNetwork;
  readonly #core: DaytonaCore;

  constructor(opts: DaytonaOptions) {
    this.#core = new DaytonaCore(opts);
    this.lifecycle = new DaytonaLifecycle(this.#core);
    this.files = new DaytonaFiles(this.#core);
    this.processes = new DaytonaProcesses(this.#core);
    this.network = new DaytonaNetwork(this.#core);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return this.#core.buildHandle(name, priv);
  }
}
