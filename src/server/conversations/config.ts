/**
 * The engine's tunables with their defaults, read from the server env.
 * Tests shrink the timeouts here instead of waiting for real ones.
 */
import { z } from 'zod';

export interface EngineConfig {
  /** Idle time after which a sandbox is parked; 0 turns parking off. */
  readonly idleTimeoutMs: number;
  /** How often the idle sweep runs. */
  readonly sweepIntervalMs: number;
  /** How long an `ask` permission request waits for an answer before it is denied. */
  readonly askTimeoutMs: number;
  /** The event writer flushes after this long or this many queued events, whichever comes first. */
  readonly eventFlushMs: number;
  readonly eventFlushMax: number;
  /** FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS: how long each of initialize / session/new / session/load may take before the launch fails. */
  readonly acpCallTimeoutMs: number;
  /**
   * FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS: a running turn whose agent sends nothing for this long fails (0 = never);
   * a held permission request and a tool call still running pause it.
   */
  readonly turnSilenceTimeoutMs: number;
  /** FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS: the adapter install (npm) budget (180 s). */
  readonly installTimeoutMs: number;
  /** `FOUNTAIN_BASE_URL` written into the sandbox's .env (PUBLIC_URL); null leaves it out. */
  readonly publicUrl: string | null;
  /** How long a turn on a runner waits for its dropped runner to return. */
  readonly recoveryWindowMs: number;
  /** How often a waiting turn retries the reattach. */
  readonly recoveryRetryMs: number;
  /** How long a reattached replay may take to reach the previous prompt's reply. */
  readonly replayBoundaryTimeoutMs: number;
  /** SANDBOX_MAX_LIFETIME_HOURS: a ready sandbox older than this (since resume or creation) is reclaimed; 0 turns it off. */
  readonly maxLifetimeMs: number;
  /** BROKER_ALLOW_UNENFORCED: a brokered account may launch on a backend without network_policy. */
  readonly brokerAllowUnenforced: boolean;
  /** FOUNTAIN_NODE_HEARTBEAT_MS: how often a node stamps its heartbeat and looks for lost nodes' turns. */
  readonly nodeHeartbeatMs: number;
  /** FOUNTAIN_NODE_EXPIRY_MS: a node whose heartbeat is older than this is lost; its open turns are adopted. */
  readonly nodeExpiryMs: number;
  /** FOUNTAIN_SKILLS_GIT_URL: where GitHub-sourced skills are cloned from (`<base>/<owner>/<repo>.git`). */
  readonly skillsGitBaseUrl: string;
  /** The least time between two `event: conversations` signals on one account stream (1 s; tests widen it). */
  readonly conversationsSignalGapMs: number;
  /** FOUNTAIN_MAX_RUNNING_TURNS: an account's running turns beyond which prompts queue (its own limit wins). */
  readonly maxRunningTurns: number;
  /** FOUNTAIN_MAX_SANDBOXES: an account's starting or ready sandboxes beyond which new ones queue (its own limit wins). */
  readonly maxSandboxes: number;
  /** FOUNTAIN_QUEUE_EXPIRY_SECONDS: how long a prompt or a new conversation may wait in the queue before it fails. */
  readonly queueExpiryMs: number;
  /** How often each node looks at the queue besides when it frees capacity itself (expiry, other nodes' frees). */
  readonly queuePollMs: number;
  /** The demo runtime's argv (absolute paths on the runner's machine). */
  readonly demoAgentArgv: readonly string[];
  /**
   * The demo runtime's wait for quiet after a session/load, where a stand-in for it streams the load's
   * history after its reply as gemini-cli does (tests); default the runtime's own (none).
   */
  readonly demoReplayQuietMs?: number;
  /** How often each node looks at the warm pools besides when an agent changes or a member is taken (pool.ts). */
  readonly poolIntervalMs: number;
}

export const ENGINE_DEFAULTS = {
  idleTimeoutMs: 60 * 60_000,
  sweepIntervalMs: 60_000,
  poolIntervalMs: 30_000,
  askTimeoutMs: 300_000,
  eventFlushMs: 5,
  conversationsSignalGapMs: 1000,
  eventFlushMax: 200,
  acpCallTimeoutMs: 30_000,
  installTimeoutMs: 180_000,
  recoveryWindowMs: 120_000,
  recoveryRetryMs: 1_000,
  replayBoundaryTimeoutMs: 10_000,
  turnSilenceTimeoutMs: 600_000,
  maxLifetimeMs: 0,
  brokerAllowUnenforced: false,
  nodeHeartbeatMs: 5_000,
  nodeExpiryMs: 30_000,
  skillsGitBaseUrl: 'https://github.com',
  maxRunningTurns: 250,
  maxSandboxes: 250,
  queueExpiryMs: 3_600_000,
  queuePollMs: 2_000,
} as const;

const minutes = z.coerce.number().int().min(0).max(525_600);
const seconds = z.coerce.number().int().min(1).max(86_400);
const secondsOrOff = z.coerce.number().int().min(0).max(86_400);

/** A seconds variable, or its default (given in ms) when blank. */
function secondsOr(
  v: string | undefined,
  defaultMs: number,
  schema: z.ZodType<number>,
): { success: true; data: number } | { success: false } {
  if (v === undefined || v.trim() === '') return { success: true, data: defaultMs / 1000 };
  const r = schema.safeParse(v);
  return r.success ? { success: true, data: r.data } : { success: false };
}

export type ConfigResult = { ok: true; value: Omit<EngineConfig, 'demoAgentArgv'> } | { ok: false; message: string };

/**
 * Reads SANDBOX_IDLE_TIMEOUT_MINUTES, FOUNTAIN_IDLE_SWEEP_SECONDS, FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS,
 * FOUNTAIN_RUNNER_RECOVERY_SECONDS, FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS, FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS,
 * FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS, FOUNTAIN_MAX_RUNNING_TURNS, FOUNTAIN_MAX_SANDBOXES,
 * FOUNTAIN_QUEUE_EXPIRY_SECONDS, PUBLIC_URL, FOUNTAIN_SKILLS_GIT_URL.
 */
export function engineConfigFromEnv(env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const blank = (v: string | undefined) => v === undefined || v.trim() === '';
  const idle = blank(env.SANDBOX_IDLE_TIMEOUT_MINUTES)
    ? { success: true as const, data: 60 }
    : minutes.safeParse(env.SANDBOX_IDLE_TIMEOUT_MINUTES);
  if (!idle.success)
    return { ok: false, message: 'SANDBOX_IDLE_TIMEOUT_MINUTES must be a whole number of minutes (0 = off)' };
  const sweep = blank(env.FOUNTAIN_IDLE_SWEEP_SECONDS)
    ? { success: true as const, data: 60 }
    : seconds.safeParse(env.FOUNTAIN_IDLE_SWEEP_SECONDS);
  if (!sweep.success)
    return { ok: false, message: 'FOUNTAIN_IDLE_SWEEP_SECONDS must be a whole number of seconds (1..86400)' };
  const ask = blank(env.FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS)
    ? { success: true as const, data: 300 }
    : seconds.safeParse(env.FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS);
  if (!ask.success)
    return {
      ok: false,
      message: 'FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS must be a whole number of seconds (1..86400)',
    };
  const recovery = blank(env.FOUNTAIN_RUNNER_RECOVERY_SECONDS)
    ? { success: true as const, data: ENGINE_DEFAULTS.recoveryWindowMs / 1000 }
    : seconds.safeParse(env.FOUNTAIN_RUNNER_RECOVERY_SECONDS);
  if (!recovery.success)
    return { ok: false, message: 'FOUNTAIN_RUNNER_RECOVERY_SECONDS must be a whole number of seconds (1..86400)' };
  const install = secondsOr(env.FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS, ENGINE_DEFAULTS.installTimeoutMs, seconds);
  if (!install.success)
    return {
      ok: false,
      message: 'FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS must be a whole number of seconds (1..86400)',
    };
  const handshake = secondsOr(env.FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS, ENGINE_DEFAULTS.acpCallTimeoutMs, seconds);
  if (!handshake.success)
    return {
      ok: false,
      message: 'FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS must be a whole number of seconds (1..86400)',
    };
  const silence = secondsOr(
    env.FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS,
    ENGINE_DEFAULTS.turnSilenceTimeoutMs,
    secondsOrOff,
  );
  if (!silence.success)
    return {
      ok: false,
      message: 'FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS must be a whole number of seconds (0 = never, up to 86400)',
    };
  const count = z.coerce.number().int().min(1).max(10_000);
  const turnsLimit = blank(env.FOUNTAIN_MAX_RUNNING_TURNS)
    ? { success: true as const, data: ENGINE_DEFAULTS.maxRunningTurns }
    : count.safeParse(env.FOUNTAIN_MAX_RUNNING_TURNS);
  if (!turnsLimit.success)
    return { ok: false, message: 'FOUNTAIN_MAX_RUNNING_TURNS must be a whole number (1..10000)' };
  const sandboxLimit = blank(env.FOUNTAIN_MAX_SANDBOXES)
    ? { success: true as const, data: ENGINE_DEFAULTS.maxSandboxes }
    : count.safeParse(env.FOUNTAIN_MAX_SANDBOXES);
  if (!sandboxLimit.success) return { ok: false, message: 'FOUNTAIN_MAX_SANDBOXES must be a whole number (1..10000)' };
  const expiry = secondsOr(env.FOUNTAIN_QUEUE_EXPIRY_SECONDS, ENGINE_DEFAULTS.queueExpiryMs, seconds);
  if (!expiry.success)
    return { ok: false, message: 'FOUNTAIN_QUEUE_EXPIRY_SECONDS must be a whole number of seconds (1..86400)' };
  if (!blank(env.FOUNTAIN_SKILLS_GIT_URL) && !/^https:\/\/[^\s]+$/.test(env.FOUNTAIN_SKILLS_GIT_URL!.trim())) {
    return { ok: false, message: 'FOUNTAIN_SKILLS_GIT_URL must be an https:// URL' };
  }
  return {
    ok: true,
    value: {
      ...ENGINE_DEFAULTS,
      idleTimeoutMs: idle.data * 60_000,
      sweepIntervalMs: sweep.data * 1000,
      askTimeoutMs: ask.data * 1000,
      recoveryWindowMs: recovery.data * 1000,
      installTimeoutMs: install.data * 1000,
      acpCallTimeoutMs: handshake.data * 1000,
      turnSilenceTimeoutMs: silence.data * 1000,
      maxRunningTurns: turnsLimit.data,
      maxSandboxes: sandboxLimit.data,
      queueExpiryMs: expiry.data * 1000,
      publicUrl: blank(env.PUBLIC_URL) ? null : env.PUBLIC_URL!.replace(/\/+$/, ''),
      skillsGitBaseUrl: blank(env.FOUNTAIN_SKILLS_GIT_URL)
        ? ENGINE_DEFAULTS.skillsGitBaseUrl
        : env.FOUNTAIN_SKILLS_GIT_URL!.trim().replace(/\/+$/, ''),
    },
  };
}
