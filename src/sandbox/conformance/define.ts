/**
 * How the suite registers one test: a hang-guard timeout on every test, and a skip when the
 * adapter does not advertise the capability a conditional test needs.
 */
import { it, type TestContext } from 'node:test';
import type { Capability } from '../capabilities.ts';
import type { SuiteContext } from './context.ts';

export const check = (ctx: SuiteContext, title: string, body: (t: TestContext) => Promise<void>): void => {
  it(title, { timeout: ctx.timeoutMs * 10 + 10_000 }, body);
};

/** Skips the running test unless `cap` is advertised; returns true when it skipped. */
export const lacks = (t: TestContext, ctx: SuiteContext, cap: Capability): boolean => {
  if (ctx.caps().has(cap)) return false;
  t.skip(`capability ${cap} not advertised`);
  return true;
};
