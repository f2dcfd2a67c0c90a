/**
 * Wraps the adapter under test so the suite sees every call: results must be Result-shaped,
 * nothing may throw or reject, and every error and frame of the run is kept for later checks.
 */
import { inspect } from 'node:util';
import type { SandboxAdapter } from '../adapter.ts';
import type { FrameSink, StreamFrame } from '../types.ts';
import { isTerminal } from './frames.ts';

/** The adapter's parts: their operations are recorded like the adapter's own. */
const PARTS = new Set(['lifecycle', 'files', 'processes', 'network', 'checkpoints']);

export interface RecordedViolation {
  readonly op: string;
  readonly what: string;
}

export class Recorder {
  /** Every value any call resolved to (ok values and errors alike). */
  readonly results: Array<{ op: string; value: unknown }> = [];
  readonly violations: RecordedViolation[] = [];
  /** Every frame delivered to an owner the suite passed in, per ref. */
  readonly framesByRef = new Map<string, StreamFrame[]>();

  wrap(adapter: SandboxAdapter): SandboxAdapter {
    const parts = new Map<PropertyKey, object>();
    return new Proxy(adapter, {
      get: (target, prop, receiver) => {
        const member: unknown = Reflect.get(target, prop, receiver);
        if (typeof prop === 'string' && PARTS.has(prop) && typeof member === 'object' && member !== null) {
          if (!parts.has(prop)) parts.set(prop, this.#wrapMethods(member));
          return parts.get(prop);
        }
        return this.#wrapMember(target, prop, member);
      },
    });
  }

  #wrapMethods<T extends object>(part: T): T {
    return new Proxy(part, {
      get: (target, prop, receiver) => this.#wrapMember(target, prop, Reflect.get(target, prop, receiver)),
    });
  }

  #wrapMember(target: object, prop: PropertyKey, member: unknown): unknown {
    if (typeof member !== 'function') return member;
    const op = String(prop);
    return (...args: unknown[]) => this.#call(op, () => Reflect.apply(member, target, this.#wrapOwners(op, args)));
  }

  #call(op: string, invoke: () => unknown): unknown {
    let out: unknown;
    try {
      out = invoke();
    } catch (thrown) {
      this.violations.push({ op, what: `threw synchronously: ${inspect(thrown)}` });
      throw thrown;
    }
    if (!(out instanceof Promise)) return out;
    return out.then(
      (value: unknown) => {
        this.results.push({ op, value });
        if (!isResultShaped(value)) this.violations.push({ op, what: `resolved to a non-Result: ${inspect(value)}` });
        return value;
      },
      (reason: unknown) => {
        this.violations.push({ op, what: `rejected: ${inspect(reason)}` });
        throw reason;
      },
    );
  }

  #wrapOwners(op: string, args: unknown[]): unknown[] {
    if (op !== 'spawn' && op !== 'attach') return args;
    return args.map((a) => {
      if (typeof a !== 'object' || a === null || typeof (a as { owner?: unknown }).owner !== 'function') return a;
      const owner = (a as { owner: FrameSink }).owner;
      const wrapped: FrameSink = (frame) => {
        this.#recordFrame(op, frame);
        owner(frame);
      };
      return { ...a, owner: wrapped };
    });
  }

  #recordFrame(op: string, frame: StreamFrame): void {
    const ref = typeof frame?.ref === 'string' ? frame.ref : '(no ref)';
    const list = this.framesByRef.get(ref) ?? [];
    if (list.some(isTerminal)) {
      this.violations.push({ op, what: `frame ${frame.type} after the terminal frame of ${ref}` });
    }
    list.push(frame);
    this.framesByRef.set(ref, list);
  }

  /** Every error value any call returned, plus every error frame. */
  errors(): unknown[] {
    const fromResults = this.results
      .filter((r) => isResultShaped(r.value) && !(r.value as { ok: boolean }).ok)
      .map((r) => (r.value as { error: unknown }).error);
    const fromFrames = [...this.framesByRef.values()]
      .flat()
      .filter((f) => f.type === 'error')
      .map((f) => (f as { error: unknown }).error);
    return [...fromResults, ...fromFrames];
  }
}

const isResultShaped = (v: unknown): boolean => {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as { ok?: unknown; value?: unknown; error?: unknown };
  if (r.ok === true) return 'value' in r;
  if (r.ok === false)
    return typeof r.error === 'object' && r.error !== null && typeof (r.error as { code?: unknown }).code === 'string';
  return false;
};
