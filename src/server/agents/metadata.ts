/**
 * An agent's `metadata`: free-form JSON, bounded in depth and size at validation so it can always
 * be stored, encoded and shown (a deeply nested value once overflowed the stack while encoding).
 */
import { z } from '@hono/zod-openapi';

export const MAX_METADATA_DEPTH = 8;
export const MAX_METADATA_BYTES = 16 * 1024;

/** Levels of arrays and objects; the metadata object itself is level 1. Iterative: depth is what it checks. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const todo: Array<[unknown, number]> = [[value, 1]];
  while (todo.length > 0) {
    const [v, d] = todo.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    deepest = Math.max(deepest, d);
    if (d > MAX_METADATA_DEPTH) return d;
    for (const child of Object.values(v)) todo.push([child, d + 1]);
  }
  return deepest;
}

export const MetadataSchema = z.record(z.string(), z.unknown()).superRefine((m, ctx) => {
  if (depthOf(m) > MAX_METADATA_DEPTH) {
    ctx.addIssue({ code: 'custom', message: `may nest at most ${MAX_METADATA_DEPTH} levels` });
    return;
  }
  const bytes = Buffer.byteLength(JSON.stringify(m), 'utf8');
  if (bytes > MAX_METADATA_BYTES)
    ctx.addIssue({ code: 'custom', message: `is ${bytes} bytes as JSON; at most ${MAX_METADATA_BYTES}` });
});
