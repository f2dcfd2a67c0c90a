/**
 * The SDK's own zod schemas for the ACP messages the client validates, plus the JSON-RPC envelope.
 * The SDK does not export its generated schemas, so they are loaded from the module file beside its entry point.
 */
import { z } from 'zod';
import type {
  InitializeResponse,
  LoadSessionResponse,
  NewSessionResponse,
  PromptResponse,
  RequestPermissionRequest,
  ResumeSessionResponse,
  SessionNotification,
  SetSessionConfigOptionResponse,
  SetSessionModeResponse,
} from '@agentclientprotocol/sdk';

/** The slice of a zod schema this module relies on; keeps the SDK's 600 KB of generated types out of tsc. */
export interface Schema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: { message: string } };
}

// The generated schemas live in dist/v1/schema/zod.gen.js, next to the stable entry point's folder.
// A file URL import bypasses the package's export map; the file is part of the published package.
const entry = import.meta.resolve('@agentclientprotocol/sdk');
const generated = (await import(new URL('../schema/zod.gen.js', entry).href)) as Record<string, unknown>;

const pick = <T>(name: string): Schema<T> => {
  const s = generated[name] as { safeParse?: unknown } | undefined;
  if (!s || typeof s.safeParse !== 'function') {
    throw new Error(`@agentclientprotocol/sdk no longer ships the schema ${name} in dist/v1/schema/zod.gen.js`);
  }
  return s as Schema<T>;
};

/** `value[key]` when `value` is an object, else undefined. */
const member = (value: unknown, key: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;

/**
 * The `update.sessionUpdate` tag of session/update params, unchecked: for routing a line cheaply
 * before a schema parses it (a failed zod parse builds its issue list), never to trust its content.
 */
export const sessionUpdateKind = (params: unknown): unknown => member(member(params, 'update'), 'sessionUpdate');

/** The same tag read from a whole JSON-RPC message. */
export const messageUpdateKind = (message: unknown): unknown => sessionUpdateKind(member(message, 'params'));

/** The slice of zod's object, union and intersection schemas the routing below reads (zod 4's public `def`/`shape`). */
interface RoutableNotification<T> extends Schema<T> {
  readonly shape?: { readonly update?: { readonly options?: readonly unknown[] } };
  extend?(shape: { update: unknown }): Schema<T>;
}

/**
 * A session/update is a union of 14 intersections tried in order, so an agent message chunk was parsed
 * twice (the user-chunk option first, failing with its issue list built) on every chunk of every turn.
 * Each option carries its own `sessionUpdate` literal and only that option can accept an update, so
 * the update is parsed with it alone: the same output. Anything else (an unknown kind, a failure) goes
 * through the SDK's union, so errors read as before; if the SDK's shape changes, the union is used as is.
 */
function routedByUpdateKind<T>(full: Schema<T>): Schema<T> {
  const n = full as RoutableNotification<T>;
  const options = n.shape?.update?.options;
  if (!options || typeof n.extend !== 'function') return full;
  const byKind = new Map<string, Schema<T>>();
  for (const option of options) {
    const kind = (option as { def?: { right?: { shape?: { sessionUpdate?: { value?: unknown } } } } }).def?.right?.shape
      ?.sessionUpdate?.value;
    if (typeof kind !== 'string' || byKind.has(kind)) return full;
    byKind.set(kind, n.extend({ update: option }));
  }
  return {
    safeParse(value: unknown) {
      const kind = sessionUpdateKind(value);
      const one = typeof kind === 'string' ? byKind.get(kind) : undefined;
      if (one) {
        const r = one.safeParse(value);
        if (r.success) return r;
      }
      return full.safeParse(value);
    },
  };
}

export const zInitializeResponse = pick<InitializeResponse>('zInitializeResponse');
export const zNewSessionResponse = pick<NewSessionResponse>('zNewSessionResponse');
export const zLoadSessionResponse = pick<LoadSessionResponse>('zLoadSessionResponse');
export const zResumeSessionResponse = pick<ResumeSessionResponse>('zResumeSessionResponse');
export const zSetSessionConfigOptionResponse = pick<SetSessionConfigOptionResponse>('zSetSessionConfigOptionResponse');
export const zSetSessionModeResponse = pick<SetSessionModeResponse>('zSetSessionModeResponse');
export const zPromptResponse = pick<PromptResponse>('zPromptResponse');
export const zSessionNotification = routedByUpdateKind(pick<SessionNotification>('zSessionNotification'));
export const zRequestPermissionRequest = pick<RequestPermissionRequest>('zRequestPermissionRequest');

export const zJsonRpcId = z.union([z.string(), z.number(), z.null()]);
export const zRpcError = z.object({ code: z.number(), message: z.string(), data: z.unknown().optional() });

/**
 * A prompt reply's `usage` (ACP's draft `Usage`, which claude-agent-acp already sends): the stable v1
 * schema above drops it, so the client reads it on its own. Counts are tokens.
 */
export const zPromptUsage = z.object({
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  totalTokens: z.number().int().min(0).nullish(),
  thoughtTokens: z.number().int().min(0).nullish(),
  cachedReadTokens: z.number().int().min(0).nullish(),
  cachedWriteTokens: z.number().int().min(0).nullish(),
});
export type PromptUsage = z.infer<typeof zPromptUsage>;
