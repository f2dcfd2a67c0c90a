/**
 * Classifies one line of agent output as a JSON-RPC message: request, notification, result or error response.
 * Total: anything else comes back as a problem value, never an exception.
 */
import type { AcpProblemCode } from './errors.ts';
import { zJsonRpcId, zRpcError } from './schemas.ts';

export type JsonRpcId = string | number | null;

export type AcpMessage =
  | { readonly kind: 'request'; readonly id: JsonRpcId; readonly method: string; readonly params: unknown }
  | { readonly kind: 'notification'; readonly method: string; readonly params: unknown }
  | { readonly kind: 'result'; readonly id: JsonRpcId; readonly result: unknown }
  | {
      readonly kind: 'error';
      readonly id: JsonRpcId;
      readonly error: { readonly code: number; readonly message: string; readonly data?: unknown };
    };

export type Classified =
  | { readonly ok: true; readonly message: AcpMessage }
  | {
      readonly ok: false;
      readonly code: Extract<AcpProblemCode, 'acp_not_json' | 'acp_invalid_message'>;
      readonly message: string;
    };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function classifyLine(line: string): Classified {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { ok: false, code: 'acp_not_json', message: 'line is not JSON' };
  }
  return classifyValue(value);
}

export function classifyValue(value: unknown): Classified {
  const bad = (message: string): Classified => ({ ok: false, code: 'acp_invalid_message', message });
  if (!isObject(value)) return bad('JSON value is not a JSON-RPC message object');
  if (value.jsonrpc !== '2.0') return bad('missing jsonrpc "2.0"');
  const hasId = 'id' in value;
  const id = hasId ? zJsonRpcId.safeParse(value.id) : undefined;
  if (id && !id.success) return bad('id must be a string, a number or null');
  const idValue = id?.success ? id.data : null;
  if ('method' in value) {
    if (typeof value.method !== 'string') return bad('method must be a string');
    if (hasId)
      return { ok: true, message: { kind: 'request', id: idValue, method: value.method, params: value.params } };
    return { ok: true, message: { kind: 'notification', method: value.method, params: value.params } };
  }
  if (!hasId) return bad('neither a request, a notification nor a response');
  if ('error' in value) {
    const e = zRpcError.safeParse(value.error);
    if (!e.success) return bad('error response without {code, message}');
    return { ok: true, message: { kind: 'error', id: idValue, error: e.data } };
  }
  if ('result' in value) return { ok: true, message: { kind: 'result', id: idValue, result: value.result } };
  return bad('response without result or error');
}

/** A response, as the journal skipper reads one: jsonrpc "2.0", no method, has result or error. */
export function isResponseTo(message: AcpMessage, id: JsonRpcId): boolean {
  return (message.kind === 'result' || message.kind === 'error') && message.id === id;
}
