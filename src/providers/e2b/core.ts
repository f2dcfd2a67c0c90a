/**
 * What every part of the E2B adapter shares: the control plane, the envd client for a sandbox,
 * name lookup (E2B assigns ids only), the live streams, and the guard that keeps errors values.
 */

import { z } from 'zod';
import type { ExecResult, Handle, SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { Private, err, fail, ok } from '../../sandbox/index.ts';
import type { ListedSandbox } from './api.ts';
import { ControlPlane } from './api.ts';
import { LiveCommand, closedBeforeExit, exitCodeOf } from './command.ts';
import type { E2BOptions, ResolvedE2BOptions } from './config.ts';
import { domainOf, envdBaseUrl, resolveOptions } from './config.ts';
import type { EndEvent, ProcessEventSink, StartRequest, StreamClose } from './envd.ts';
import { Envd } from './envd.ts';
import { internal } from './errors.ts';

/** Metadata that stands in for a name: E2B assigns ids only. */
export const NAME_KEY = 'fountain_name';
/** The reaper's label on every platform sandbox. */
export const LABEL_KEY = 'fountain';

/** What a handle's private part carries: the sandbox id and envd's access token (a secret). */
export interface E2BTarget {
  readonly sandboxId: string;
  readonly accessToken: string | null;
  readonly domain: string | null;
}

export const targetSchema = z.object({
  sandboxId: z.string().min(1),
  accessToken: z.string().nullable(),
  domain: z.string().nullable(),
});

export const oldestFirst = (a: ListedSandbox, b: ListedSandbox) =>
  Date.parse(a.startedAt) - Date.parse(b.startedAt) ||
  (a.sandboxID < b.sandboxID ? -1 : a.sandboxID > b.sandboxID ? 1 : 0);

export class E2BCore {
  readonly provider = 'e2b' as const;

  readonly o: ResolvedE2BOptions;

  readonly api: ControlPlane;

  /** Live commands, so heartbeats stop and nothing leaks when they end. */
  readonly live = new Set<LiveCommand>();

  constructor(options: E2BOptions) {
    this.o = resolveOptions(options);
    this.api = new ControlPlane({
      baseUrl: this.o.baseUrl,
      apiKey: this.o.apiKey,
      timeoutMs: this.o.requestTimeoutMs,
      pageSize: this.o.listPageSize,
      maxPages: 1000,
    });
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv ? { provider: this.provider, name, private: priv } : { provider: this.provider, name };
  }

  async guard<T>(context: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      return err(internal(context, e, [this.o.apiKey]));
    }
  }

  /** Every sandbox carrying this name, oldest first. An empty list is the only proof of absence. */
  lookup(name: string): Promise<SandboxResult<ListedSandbox[]>> {
    return this.api
      .listSandboxes({ [LABEL_KEY]: '1', [NAME_KEY]: name })
      .then((r) => (r.ok ? ok([...r.value].sort(oldestFirst)) : r));
  }

  async handleFor(
    name: string,
    sandboxId: string,
    fresh?: { envdAccessToken?: string | null | undefined; domain?: string | null | undefined },
  ): Promise<SandboxResult<Handle>> {
    let token = fresh?.envdAccessToken;
    let domain = fresh?.domain;
    if (token === undefined) {
      const d = await this.api.getSandbox(sandboxId);
      if (!d.ok) return d;
      token = d.value.envdAccessToken;
      domain = d.value.domain;
    }
    const target: E2BTarget = { sandboxId, accessToken: token ?? null, domain: domain ?? null };
    return ok(this.buildHandle(name, new Private(target)));
  }

  /** The sandbox behind a handle: from its private part, else by name. */
  async target(handle: Handle): Promise<SandboxResult<E2BTarget>> {
    const p = handle.private?.reveal();
    const parsed = targetSchema.safeParse(p);
    if (parsed.success) return ok(parsed.data);
    const found = await this.lookup(handle.name);
    if (!found.ok) return found;
    const first = found.value[0];
    if (!first) return fail('not_found', `no e2b sandbox named ${handle.name}`);
    const h = await this.handleFor(handle.name, first.sandboxID);
    if (!h.ok) return h;
    return ok(targetSchema.parse(h.value.private?.reveal()));
  }

  envd(t: E2BTarget): Envd {
    const sandboxUrl = envdBaseUrl(t.sandboxId, t.domain ?? domainOf(this.o.baseUrl), this.o.sandboxUrl);
    return new Envd(
      { sandboxId: t.sandboxId, accessToken: t.accessToken, sandboxUrl },
      {
        ...(this.o.user ? { user: this.o.user } : {}),
        timeoutMs: this.o.requestTimeoutMs,
        keepaliveS: this.o.keepaliveS,
        secrets: [this.o.apiKey],
      },
    );
  }

  /** Runs a process to completion over one Start stream. */
  run(
    envd: Envd,
    process: StartRequest['process'],
    lifetimeMs: number,
    stderrToStdout: boolean,
  ): Promise<SandboxResult<ExecResult>> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let ended: EndEvent | null = null;
      const sink: ProcessEventSink = {
        start: () => undefined,
        stdout: (d) => chunks.push(d),
        stderr: (d) => {
          if (stderrToStdout) chunks.push(d);
        },
        end: (e) => {
          ended = e;
        },
        closed: (how: StreamClose) => {
          const end = ended as EndEvent | null;
          // envd ends the process at the deadline and says so in the end-stream, after the end event.
          if (how.kind === 'end_stream' && how.error?.detail?.includes('deadline_exceeded')) {
            resolve(fail('unavailable', 'timeout'));
            return;
          }
          if (end) {
            const code = exitCodeOf(end);
            if (code !== undefined) {
              resolve(ok({ output: new Uint8Array(Buffer.concat(chunks)), exitCode: code }));
              return;
            }
          }
          if (how.kind === 'end_stream' && how.error) {
            resolve(err(how.error));
            return;
          }
          resolve(err(closedBeforeExit(how.kind === 'dropped' ? how.detail : end ? end.status : 'no end event')));
        },
      };
      envd.start({ process, stdin: false }, lifetimeMs, sink);
    });
  }

  /** Drops every live stream this adapter holds (shutdown); remote processes keep running. */
  close(): void {
    for (const l of [...this.live]) void l.stop();
  }
}

/** Waits for one stream's `start` and ignores the rest: the shim's acknowledgement. */
export class StartAck implements ProcessEventSink {
  #settle: ((r: { ok: true; pid: number } | { ok: false; error: SandboxError }) => void) | null = null;
  readonly acked = new Promise<{ ok: true; pid: number } | { ok: false; error: SandboxError }>(
    (resolve) => (this.#settle = resolve),
  );
  start(pid: number): void {
    this.#settle?.({ ok: true, pid });
  }
  stdout(): void {}
  stderr(): void {}
  end(): void {}
  closed(how: StreamClose): void {
    this.#settle?.({
      ok: false,
      error:
        how.kind === 'end_stream' && how.error
          ? how.error
          : closedBeforeExit(how.kind === 'dropped' ? how.detail : 'before start'),
    });
  }
}

/** Commands remember their sandbox through the envd client they were started with. */
export const targets = new WeakMap<LiveCommand, E2BTarget>();
export function targetOf(live: LiveCommand): E2BTarget {
  const t = targets.get(live);
  if (!t) throw new Error('command without a sandbox');
  return t;
}
