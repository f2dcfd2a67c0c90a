/**
 * The E2B sandbox adapter, composed of its parts: lifecycle, files, processes and network policy.
 * No checkpoints part: E2B snapshots are not wired up. No tty: envd's PTY merges the streams.
 */
import type { Handle, Private, SandboxAdapter } from '../../sandbox/index.ts';
import type { E2BOptions } from './config.ts';
import { E2BCore } from './core.ts';
import { E2BFiles } from './files.ts';
import { E2BLifecycle } from './lifecycle.ts';
import { E2BNetwork } from './network.ts';
import { E2BProcesses } from './processes.ts';

export { LABEL_KEY, NAME_KEY, type E2BTarget } from './core.ts';

export class E2BAdapter implements SandboxAdapter {
  readonly provider = 'e2b' as const;
  readonly lifecycle: E2BLifecycle;
  readonly files: E2BFiles;
  readonly processes: E2BProcesses;
  readonly network: E2BNetwork;
  readonly #core: E2BCore;

  constructor(options: E2BOptions) {
    this.#core = new E2BCore(options);
    this.lifecycle = new E2BLifecycle(this.#core);
    this.files = new E2BFiles(this.#core);
    this.processes = new E2BProcesses(this.#core);
    this.network = new E2BNetwork(this.#core);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return this.#core.buildHandle(name, priv);
  }

  /** Drops every live stream this adapter holds (shutdown); remote processes keep running. */
  close(): void {
    this.#core.close();
  }
}
