/**
 * A minimal HTTP transport over node:http(s) for E2B's REST control plane and envd's file upload:
 * buffered calls with a deadline (envd's RPCs go through the Connect transport instead).
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { err, ok } from '../../sandbox/index.ts';
import { fromTransport } from './errors.ts';

export type Headers = Record<string, string>;

export interface HttpRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly url: URL;
  readonly headers: Headers;
  readonly body?: Buffer;
  /** Deadline for the whole buffered call. */
  readonly timeoutMs: number;
  /** Only used to scrub transport error messages. */
  readonly secrets: readonly (string | null | undefined)[];
  readonly context: string;
}

export interface HttpReply {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

const lib = (url: URL) => (url.protocol === 'https:' ? https : http);

function start(
  req: HttpRequest,
  onResponse: (res: IncomingMessage, abort: () => void) => void,
  onError: (e: SandboxError) => void,
): void {
  let settled = false;
  const r = lib(req.url).request(req.url, {
    method: req.method,
    headers: { ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) },
  });
  const timer = setTimeout(() => {
    if (settled) return;
    settled = true;
    r.destroy();
    onError(fromTransport({ code: 'timeout' }, req.context, req.secrets));
  }, req.timeoutMs);
  r.on('error', (e) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    onError(fromTransport(e, req.context, req.secrets));
  });
  r.on('response', (res) => {
    if (settled) {
      res.destroy();
      return;
    }
    settled = true;
    clearTimeout(timer);
    onResponse(res, () => {
      res.destroy();
      r.destroy();
    });
  });
  r.end(req.body);
}

/** A buffered call: resolves with any status (callers decide what a status means); transport faults are errors. */
export function call(req: HttpRequest): Promise<SandboxResult<HttpReply>> {
  return new Promise((resolve) => {
    const deadline = Date.now() + req.timeoutMs;
    start(
      req,
      (res, abort) => {
        const chunks: Buffer[] = [];
        const left = Math.max(1, deadline - Date.now());
        const timer = setTimeout(() => {
          abort();
          resolve(err(fromTransport({ code: 'timeout' }, req.context, req.secrets)));
        }, left);
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => {
          clearTimeout(timer);
          resolve(err(fromTransport(e, req.context, req.secrets)));
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve(ok({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        res.on('aborted', () => {
          clearTimeout(timer);
          resolve(err(fromTransport({ code: 'ECONNRESET' }, req.context, req.secrets)));
        });
      },
      (e) => resolve(err(e)),
    );
  });
}
