/**
 * The E2B adapter's options and their defaults, plus the mapping from environment variables
 * (blank equals unset). Nothing here reads process.env itself: the server's config module does.
 */
import type { Logger } from 'pino';

export interface E2BOptions {
  /** `E2B_API_KEY`. Kept in a private field; never logged, never in an error. */
  readonly apiKey: string;
  /** `E2B_BASE_URL`: the control plane (default `https://api.e2b.app`). */
  readonly baseUrl?: string;
  /**
   * `E2B_SANDBOX_URL`: where envd is reached, naming the sandbox in `E2b-Sandbox-Id` headers.
   * Default `https://sandbox.<domain>`, the domain from the sandbox's own reply or the base URL.
   */
  readonly sandboxUrl?: string;
  /** `E2B_TEMPLATE` (default `base`; production builds `fountain` from images/e2b/). */
  readonly template?: string;
  /** `E2B_USER`: the Linux user commands run as (`sprite` on the fountain template); absent = envd's default. */
  readonly user?: string;
  /** Seconds a sandbox lives without a heartbeat before it auto-pauses (default 300). */
  readonly sandboxTimeoutS?: number;
  /** Deadline for one control-plane or envd call (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** How long spawn waits for envd's `start` event (default 30 s). */
  readonly spawnAckTimeoutMs?: number;
  /** Seconds between envd keepalive events on open streams (default 30). */
  readonly keepaliveS?: number;
  /** Page size for metadata listings (1..100, default 100). */
  readonly listPageSize?: number;
  readonly logger?: Logger;
}

export interface ResolvedE2BOptions {
  readonly apiKey: string;
  readonly baseUrl: string;
  readonly sandboxUrl: string | undefined;
  readonly template: string;
  readonly user: string | undefined;
  readonly sandboxTimeoutS: number;
  readonly requestTimeoutMs: number;
  readonly spawnAckTimeoutMs: number;
  readonly keepaliveS: number;
  readonly listPageSize: number;
  readonly logger: Logger | undefined;
}

export const DEFAULT_BASE_URL = 'https://api.e2b.app';
export const DEFAULT_TEMPLATE = 'base';

const present = (v: string | undefined): string | undefined =>
  v === undefined || v.trim() === '' ? undefined : v.trim();

export function resolveOptions(o: E2BOptions): ResolvedE2BOptions {
  return {
    apiKey: o.apiKey,
    baseUrl: present(o.baseUrl) ?? DEFAULT_BASE_URL,
    sandboxUrl: present(o.sandboxUrl),
    template: present(o.template) ?? DEFAULT_TEMPLATE,
    user: present(o.user),
    sandboxTimeoutS: Math.max(1, Math.floor(o.sandboxTimeoutS ?? 300)),
    requestTimeoutMs: Math.max(1, o.requestTimeoutMs ?? 30_000),
    spawnAckTimeoutMs: Math.max(1, o.spawnAckTimeoutMs ?? 30_000),
    keepaliveS: Math.max(1, Math.floor(o.keepaliveS ?? 30)),
    listPageSize: Math.min(100, Math.max(1, Math.floor(o.listPageSize ?? 100))),
    logger: o.logger,
  };
}

/** Options from `E2B_API_KEY`, `E2B_BASE_URL`, `E2B_SANDBOX_URL`, `E2B_TEMPLATE`, `E2B_USER`; null without a key. */
export function optionsFromEnv(env: Readonly<Record<string, string | undefined>>): E2BOptions | null {
  const apiKey = present(env.E2B_API_KEY);
  if (!apiKey) return null;
  const opt = (k: string) => present(env[k]);
  return {
    apiKey,
    ...(opt('E2B_BASE_URL') ? { baseUrl: opt('E2B_BASE_URL') } : {}),
    ...(opt('E2B_SANDBOX_URL') ? { sandboxUrl: opt('E2B_SANDBOX_URL') } : {}),
    ...(opt('E2B_TEMPLATE') ? { template: opt('E2B_TEMPLATE') } : {}),
    ...(opt('E2B_USER') ? { user: opt('E2B_USER') } : {}),
  };
}

/** The domain envd hosts hang off: `api.e2b.app` → `e2b.app`. */
export function domainOf(baseUrl: string): string {
  try {
    const host = new URL(baseUrl).host;
    return host.startsWith('api.') ? host.slice(4) : host;
  } catch {
    return 'e2b.app';
  }
}

/** The E2B-run domains that serve the shared `sandbox.<domain>` host (js-sdk connectionConfig.ts). */
const SHARED_HOST_DOMAINS = new Set(['e2b.app', 'e2b.dev', 'e2b.pro', 'e2b-staging.dev']);

/** envd's port inside every sandbox. */
export const ENVD_PORT = 49983;

/**
 * Where envd of one sandbox is reached: the configured override; `https://sandbox.<domain>` (the
 * sandbox named in headers) on E2B's own domains; elsewhere `https://49983-<id>.<domain>`, as the
 * SDK's getSandboxUrl does, since other deployments may not serve the shared host.
 */
export function envdBaseUrl(sandboxId: string, domain: string, override: string | undefined): string {
  if (override) return override;
  if (SHARED_HOST_DOMAINS.has(domain)) return `https://sandbox.${domain}`;
  return `https://${ENVD_PORT}-${sandboxId}.${domain}`;
}
