/**
 * The Sprites (Fly.io) sandbox adapter, composed of its parts: the contract mapped onto the Sprites
 * REST API and exec WebSocket, with the workarounds its quirks force (see docs/integrations/sprites.md).
 */
import type { Handle, Private, SandboxAdapter } from '../../sandbox/index.ts';
import type { SpritesOptions } from './config.ts';
import { SpritesCore } from './core.ts';
import { SpritesFiles } from './files.ts';
import { SpritesLifecycle } from './lifecycle.ts';
import { SpritesNetwork } from './network.ts';
import { SpritesProcesses } from './processes.ts';

/**
 * `suspend`: Sprites hibernates an idle sprite by itself and keeps its disk (not its processes);
 * suspend ends the sessions so hibernation can happen. No checkpoints part: not wired up. No public
 * URL: it needs the Sprites token. No `tty`: not proven here.
 */
export class SpritesAdapter implements SandboxAdapter {
  readonly provider = 'sprites' as const;
  readonly lifecycle: SpritesLifecycle;
  readonly files: SpritesFiles;
  readonly processes: SpritesProcesses;
  readonly network: SpritesNetwork;
  readonly #core: SpritesCore;

  constructor(opts: SpritesOptions = {}) {
    this.#core = new SpritesCore(opts);
    this.processes = new SpritesProcesses(this.#core);
    this.lifecycle = new SpritesLifecycle(this.#core, this.processes);
    this.files = new SpritesFiles(this.#core);
    this.network = new SpritesNetwork(this.#core);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return this.#core.buildHandle(name, priv);
  }
}
