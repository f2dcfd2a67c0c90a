/**
 * The daemon's connection state in a small JSON file, for whatever watches the runner from beside it
 * (the runner image's HEALTHCHECK): connected or not, and when a heartbeat last crossed the socket.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';

const runnerStatusSchema = z.object({
  state: z.enum(['connected', 'disconnected']),
  /** When the state was last confirmed: the connection opened, a heartbeat crossed it, or it ended. */
  at: z.iso.datetime(),
  pid: z.number().int().positive(),
});
export type RunnerStatus = z.infer<typeof runnerStatusSchema>;

/**
 * A link listener for runDaemon's onLink that keeps `path` current. Written whole to a temporary
 * file and renamed, so a reader never sees half a file; a write that fails is logged once and the
 * daemon carries on (its health is then reported as unknown, never as good).
 */
export function statusFileWriter(
  path: string,
  logger: Logger,
  now: () => Date = () => new Date(),
): (up: boolean) => void {
  let warned = false;
  const write = (up: boolean) => {
    const status: RunnerStatus = {
      state: up ? 'connected' : 'disconnected',
      at: now().toISOString(),
      pid: process.pid,
    };
    const tmp = `${path}.${process.pid}.tmp`;
    try {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(tmp, `${JSON.stringify(status)}\n`, { mode: 0o644 });
      renameSync(tmp, path);
    } catch (e) {
      if (!warned) logger.warn({ path, err: (e as Error).message }, 'runner: cannot write the status file');
      warned = true;
    }
  };
  write(false);
  return write;
}

/**
 * Whether a status file's content says the runner is healthy: connected, with a heartbeat no older
 * than `maxAgeMs` (a daemon whose event loop is stuck stops confirming, even with the socket open).
 */
export function statusHealthy(text: string, maxAgeMs: number, now: Date = new Date()): boolean {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return false;
  }
  const parsed = runnerStatusSchema.safeParse(json);
  if (!parsed.success || parsed.data.state !== 'connected') return false;
  const age = now.getTime() - Date.parse(parsed.data.at);
  return age >= -maxAgeMs && age <= maxAgeMs;
}
