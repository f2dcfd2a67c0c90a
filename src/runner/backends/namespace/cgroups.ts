/**
 * One sandbox's control groups (cgroup v1: freezer, memory, pids): limits on memory and process
 * count, freeze and thaw for suspend, and the kill of whatever is left when the sandbox goes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';
import { sleep } from '../process/groups.ts';

export const CONTROLLERS = ['freezer', 'memory', 'pids'] as const;
export type Controller = (typeof CONTROLLERS)[number];

export interface CgroupLimits {
  readonly memoryBytes: number;
  readonly pids: number;
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Null when every controller is mounted as cgroup v1 under `mount`, else why not. */
export function cgroupV1Problem(mount: string): string | null {
  if (existsSync(join(mount, 'cgroup.controllers')) && !existsSync(join(mount, 'freezer'))) {
    return `${mount} is a cgroup v2 hierarchy; the namespace backend needs the cgroup v1 freezer, memory and pids controllers`;
  }
  for (const c of CONTROLLERS) {
    if (!existsSync(join(mount, c, 'cgroup.procs')))
      return `the cgroup v1 ${c} controller is not mounted at ${join(mount, c)}`;
  }
  return null;
}

export class SandboxCgroup {
  readonly #dirs: Record<Controller, string>;

  /** `relative` is the group's path below each controller's mount, e.g. `fountain/<id>`. */
  constructor(mount: string, relative: string) {
    this.#dirs = {
      freezer: join(mount, 'freezer', relative),
      memory: join(mount, 'memory', relative),
      pids: join(mount, 'pids', relative),
    };
  }

  /** The files a process writes its own pid into to join every controller's group. */
  get procsFiles(): string[] {
    return CONTROLLERS.map((c) => join(this.#dirs[c], 'cgroup.procs'));
  }

  async ensure(limits: CgroupLimits): Promise<Result<void, string>> {
    try {
      for (const c of CONTROLLERS) await mkdir(this.#dirs[c], { recursive: true });
      await writeFile(join(this.#dirs.memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
      await writeFile(join(this.#dirs.pids, 'pids.max'), String(limits.pids));
      return ok(undefined);
    } catch (e) {
      return err(`cgroup setup: ${message(e)}`);
    }
  }

  state(): 'FROZEN' | 'FREEZING' | 'THAWED' | 'absent' {
    try {
      const s = readFileSync(join(this.#dirs.freezer, 'freezer.state'), 'utf8').trim();
      return s === 'FROZEN' || s === 'FREEZING' ? s : 'THAWED';
    } catch {
      return 'absent';
    }
  }

  /** Freezes every process; waits (bounded) for the kernel to report FROZEN. */
  async freeze(timeoutMs = 5000): Promise<Result<void, string>> {
    try {
      await writeFile(join(this.#dirs.freezer, 'freezer.state'), 'FROZEN');
      const deadline = Date.now() + timeoutMs;
      while (this.state() !== 'FROZEN') {
        if (Date.now() > deadline) return err('the sandbox did not freeze in time');
        await sleep(10);
      }
      return ok(undefined);
    } catch (e) {
      return err(`freeze: ${message(e)}`);
    }
  }

  async thaw(): Promise<Result<void, string>> {
    if (this.state() === 'absent' || this.state() === 'THAWED') return ok(undefined);
    try {
      await writeFile(join(this.#dirs.freezer, 'freezer.state'), 'THAWED');
      return ok(undefined);
    } catch (e) {
      return err(`thaw: ${message(e)}`);
    }
  }

  async pids(): Promise<number[]> {
    try {
      const text = await readFile(join(this.#dirs.pids, 'cgroup.procs'), 'utf8');
      return text.split('\n').filter(Boolean).map(Number).filter(Number.isSafeInteger);
    } catch {
      return [];
    }
  }

  /** SIGKILLs every member until none is left (members may fork meanwhile), then removes the groups. */
  async remove(timeoutMs = 5000): Promise<Result<void, string>> {
    await this.thaw();
    const deadline = Date.now() + timeoutMs;
    for (let left = await this.pids(); left.length > 0; left = await this.pids()) {
      if (Date.now() > deadline) return err(`processes left in the sandbox: ${left.join(' ')}`);
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await sleep(10);
    }
    for (const c of CONTROLLERS) {
      try {
        await rmdir(this.#dirs[c]);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return err(`cgroup removal: ${message(e)}`);
      }
    }
    return ok(undefined);
  }
}
