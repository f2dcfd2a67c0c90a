/**
 * The in-memory fake sandbox adapter (provider `fake`), composed of its parts: scripted commands,
 * detachable sessions with replay, create_new, forced termination and a recorded network policy.
 * For tests only. No checkpoints part.
 */
import type { SandboxAdapter } from '../../sandbox/adapter.ts';
import type { Private } from '../../sandbox/private.ts';
import type { Handle } from '../../sandbox/types.ts';
import { FakeCore, type FakeAdapterOptions } from './core.ts';
import { FakeFiles } from './files.ts';
import { FakeLifecycle } from './lifecycle.ts';
import { FakeNetwork } from './network.ts';
import { FakeProcesses } from './processes.ts';

export type { FakeAdapterOptions } from './core.ts';

export class FakeAdapter implements SandboxAdapter {
  readonly provider = 'fake' as const;
  readonly lifecycle: FakeLifecycle;
  readonly files: FakeFiles;
  readonly processes: FakeProcesses;
  readonly network: FakeNetwork;
  readonly #core: FakeCore;

  constructor(opts: FakeAdapterOptions = {}) {
    this.#core = new FakeCore(opts);
    this.lifecycle = new FakeLifecycle(this.#core);
    this.files = new FakeFiles(this.#core);
    this.processes = new FakeProcesses(this.#core);
    this.network = new FakeNetwork(this.#core);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return this.#core.buildHandle(name, priv);
  }
}
