/**
 * The daemon's dial rules: the WebSocket URL and query, how an HTTP
 * refusal of the upgrade or a close code is classified (give up, retry, clean), and the backoff.
 */
import { CLOSE } from '../wire/index.ts';

export interface RunnerIdentity {
  readonly name: string;
  readonly hostname: string;
  readonly os: string;
  readonly arch: string;
  readonly version: string;
  readonly root: string;
  /** Comma-separated backend capabilities; omitted from the query when undefined. */
  readonly capabilities?: string;
  /** What a sandbox is here (`process`, `namespace`, `microvm`); omitted from the query when undefined. */
  readonly backend?: string;
}

/** `<base>/api/runners/ws?name=…` with http→ws, https→wss; null when the base URL is not http(s). */
export function runnerSocketUrl(baseUrl: string, id: RunnerIdentity): URL | null {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/api/runners/ws`;
  url.search = '';
  url.hash = '';
  for (const [k, v] of Object.entries(id)) if (v !== undefined) url.searchParams.set(k, v);
  return url;
}

/** How one connection attempt ended. */
export type Outcome =
  /** Never retry: the operator must change something. */
  | { readonly kind: 'give_up'; readonly message: string }
  /** 1000/1001: reconnect with the backoff counter reset. */
  | { readonly kind: 'clean'; readonly reason: string }
  /**
   * Anything else: reconnect with the counter incremented, or reset when `established` (the server
   * took the socket and answered over it, so this is a new failure, not a failing dial). A close the
   * server chose as a refusal (4409, 4404) says `established: false` whatever crossed first.
   */
  | { readonly kind: 'retry'; readonly reason: string; readonly established?: boolean }
  /** The daemon was asked to stop. */
  | { readonly kind: 'stopped' };

const snippet = (body: string): string => {
  const t = body.trim();
  return t.length > 500 ? `${t.slice(0, 500)}…` : t;
};

/** The `error` code of a JSON refusal body, if it has one. */
function refusalCode(body: string): string | undefined {
  try {
    const v: unknown = JSON.parse(body);
    return v !== null && typeof v === 'object' && typeof (v as { error?: unknown }).error === 'string'
      ? (v as { error: string }).error
      : undefined;
  } catch {
    return undefined;
  }
}

export function classifyRefusal(status: number, body: string): Outcome {
  const detail = snippet(body);
  const withBody = detail ? `: ${detail}` : '';
  if (status === 403 && refusalCode(body) === 'runner_key_mismatch') {
    // A key from "Add runner" belongs to one runner name; logging in again would not help.
    return { kind: 'give_up', message: `this runner key belongs to another runner (HTTP 403${withBody})` };
  }
  if (status === 401 || status === 403) {
    return {
      kind: 'give_up',
      message: `API key refused (HTTP ${status}${withBody}); run \`fountain auth login\` with a full-scope key`,
    };
  }
  if (status === 404)
    return { kind: 'give_up', message: 'self-hosted runners are disabled on this instance (HTTP 404)' };
  if (status === 400) return { kind: 'give_up', message: `runner rejected (HTTP 400${withBody})` };
  if (status === 409) return { kind: 'retry', reason: 'a runner with this name is already connected (HTTP 409)' };
  return { kind: 'retry', reason: `unexpected HTTP ${status}${withBody}` };
}

export function classifyClose(code: number, reason: string): Outcome {
  if (code === CLOSE.normal || code === CLOSE.goingAway)
    return { kind: 'clean', reason: `closed (${code}${reason ? ` ${reason}` : ''})` };
  if (code === CLOSE.alreadyConnected)
    return {
      kind: 'retry',
      reason: `a runner with this name is already connected (${code})`,
      established: false,
    };
  if (code === CLOSE.runnerDeleted)
    return { kind: 'retry', reason: `runner deleted; registering again (${code})`, established: false };
  return { kind: 'retry', reason: `closed (${code}${reason ? ` ${reason}` : ''})` };
}

export interface BackoffTimings {
  readonly baseMs: number;
  readonly capMs: number;
}

/** delay(attempt) = base << (attempt − 1), capped; attempt 0 (after a clean close) waits `base`. */
export function backoffDelay(attempt: number, t: BackoffTimings): number {
  if (attempt <= 1) return Math.min(t.baseMs, t.capMs);
  return Math.min(t.capMs, t.baseMs * 2 ** Math.min(attempt - 1, 30));
}
