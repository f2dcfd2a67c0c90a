/**
 * The price table the gateway costs each call with: US dollars per million tokens by model id, the
 * built-in list below extended or overridden by FOUNTAIN_MODEL_PRICES (a JSON object of the same shape).
 */
import { z } from 'zod';
import type { CallUsage } from './usage.ts';

const Price = z
  .object({
    input: z.number().nonnegative(),
    output: z.number().nonnegative(),
    cache_read: z.number().nonnegative().optional(),
    cache_write: z.number().nonnegative().optional(),
  })
  .strict();
export type Price = z.infer<typeof Price>;

export const PriceTableSchema = z.record(z.string().min(1).max(200), Price);
export type PriceTable = Readonly<Record<string, Price>>;

/** List prices as published by each vendor when this table was written; an operator's table wins. */
export const DEFAULT_PRICES: PriceTable = {
  'claude-opus-4-1': { input: 15, output: 75, cache_read: 1.5, cache_write: 18.75 },
  'claude-sonnet-4-5': { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  'claude-haiku-4-5': { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
  'gpt-5': { input: 1.25, output: 10, cache_read: 0.125 },
  'gpt-5-codex': { input: 1.25, output: 10, cache_read: 0.125 },
  'gpt-5-mini': { input: 0.25, output: 2, cache_read: 0.025 },
  'gemini-2.5-pro': { input: 1.25, output: 10, cache_read: 0.31 },
  'gemini-2.5-flash': { input: 0.3, output: 2.5, cache_read: 0.075 },
};

/** Parses FOUNTAIN_MODEL_PRICES; the message names what is wrong. */
export function parsePrices(raw: string | undefined): { ok: true; value: PriceTable } | { ok: false; message: string } {
  if (raw === undefined || raw.trim() === '') return { ok: true, value: DEFAULT_PRICES };
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return { ok: false, message: 'FOUNTAIN_MODEL_PRICES must be a JSON object' };
  }
  const p = PriceTableSchema.safeParse(v);
  if (!p.success) {
    const i = p.error.issues[0];
    return { ok: false, message: `FOUNTAIN_MODEL_PRICES: ${i?.path.join('.') || '_'}: ${i?.message ?? 'invalid'}` };
  }
  return { ok: true, value: { ...DEFAULT_PRICES, ...p.data } };
}

/** The call's cost in millionths of a dollar, or null when the model has no price. */
export function costMicros(prices: PriceTable, model: string | null, u: CallUsage): number | null {
  if (!model) return null;
  const bare = model.slice(model.lastIndexOf('/') + 1);
  const p = prices[model] ?? prices[bare];
  if (!p) return null;
  // Dollars per million tokens is millionths of a dollar per token.
  return Math.round(
    u.input * p.input +
      u.output * p.output +
      u.cacheRead * (p.cache_read ?? p.input) +
      u.cacheWrite * (p.cache_write ?? p.input),
  );
}
