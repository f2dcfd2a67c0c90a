/**
 * Process-group signalling: every command runs as the leader of its own group, so a signal
 * to -pid reaches everything it started that did not leave the group.
 */

/** Signals a whole group; false when it is already gone. Never throws. */
export function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** True while any member of the group is alive. */
export function groupAlive(pid: number): boolean {
  return signalGroup(pid, 0);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves true when `done` settles within `ms`, false on timeout. */
export async function within(done: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), ms);
  });
  try {
    return await Promise.race([done.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * SIGTERM to the group; SIGKILL to whatever of it is left after `graceMs` (the leader and any
 * member that ignored the TERM); then up to `afterKillMs` more for the leader's exit to be observed.
 */
export async function stopGroup(
  pid: number,
  exited: Promise<unknown>,
  graceMs: number,
  afterKillMs = 2000,
): Promise<void> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  await within(exited, graceMs);
  while (groupAlive(pid) && Date.now() < deadline) await sleep(25);
  signalGroup(pid, 'SIGKILL');
  await within(exited, afterKillMs);
}
