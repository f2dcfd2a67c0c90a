/**
 * How the suite registers one test: a hang-guard timeout on every test, and a skip (with its reason)
 * when the adapter lacks the optional part or does not advertise the capability a test needs.
 */
import { it, type TestContext } from 'node:test';
import type { Capability } from '../capabilities.ts';
import type { SuiteContext } from './context.ts';

/** The optional parts of an adapter; a group for one runs only against adapters that have it. */
export type OptionalPart = 'network' | 'checkpoints';

export const check = (ctx: SuiteContext, title: string, body: (t: TestContext) => Promise<void>): void => {
  it(title, { timeout: ctx.timeoutMs * 10 + 10_000 }, body);
};

/** Skips the running test unless `cap` is advertised; returns true when it skipped. */
export const lacks = (t: TestContext, ctx: SuiteContext, cap: Capability): boolean => {
  if (ctx.caps().has(cap)) return false;
  t.skip(`capability ${cap} not advertised`);
  return true;
};

/** Skips the running test unless the adapter has `part`; returns true when it skipped. */
export const lacksPart = (t: TestContext, ctx: SuiteContext, part: OptionalPart): boolean => {
  if (ctx.adapter[part] !== undefined) return false;
  t.skip(`the adapter has no ${part} part`);
  return true;
};
