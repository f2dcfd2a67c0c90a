/**
 * Conversation labels: `key` or `key=value`, at most 32 a conversation, set and removed by the user (API,
 * web, CLI) or by the agent (team MCP); the list filters by them. Parsing, the one update, and the filter.
 */
import { and, eq, sql, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { conversations } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

export const LABELS_MAX = 32;
const KEY = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}$/;
/** A value: no comma (the filter's separator), no control character, not blank. */
const VALUE = /^[^,\p{Cc}]{1,128}$/u;

export interface Label {
  readonly key: string;
  /** '' for a bare key. */
  readonly value: string;
}

export const LABEL_RULE =
  'a label is key or key=value: the key 1-63 letters, digits, . _ : / - (starting with a letter or digit), the value up to 128 characters without commas';

/** Parses `key` or `key=value` (whitespace around each part is dropped); null when it breaks the rule. */
export function parseLabel(text: string): Label | null {
  const at = text.indexOf('=');
  const key = (at < 0 ? text : text.slice(0, at)).trim();
  const value = at < 0 ? '' : text.slice(at + 1).trim();
  if (!KEY.test(key)) return null;
  if (at >= 0 && !VALUE.test(value)) return null;
  return { key, value };
}

/** A label as people write it. */
export const labelText = (l: Label): string => (l.value === '' ? l.key : `${l.key}=${l.value}`);

/** A stored label map as sorted `key` / `key=value` strings: the API's and the pages' form. */
export const labelList = (labels: Readonly<Record<string, string>>): string[] =>
  Object.keys(labels)
    .sort()
    .map((key) => labelText({ key, value: labels[key]! }));

/** One label in a request body, validated to the rule. */
export const LabelField = z
  .string()
  .max(200)
  .transform((s, ctx) => {
    const l = parseLabel(s);
    if (!l) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)}: ${LABEL_RULE}` });
      return z.NEVER;
    }
    return l;
  });

/** A key to remove. */
export const LabelKeyField = z.string().regex(KEY, 'a label key is 1-63 letters, digits, . _ : / -');

/** `?label=a,b=c`: every label must match (a bare key matches any value). */
export const LabelFilterParam = z
  .string()
  .max(1000)
  .transform((s, ctx) => {
    const out: Label[] = [];
    for (const part of s.split(',')) {
      if (part.trim() === '') continue;
      const l = parseLabel(part);
      if (!l) {
        ctx.addIssue({ code: 'custom', message: `label filter ${JSON.stringify(part)}: ${LABEL_RULE}` });
        return z.NEVER;
      }
      out.push(l);
    }
    return out;
  });

/** The WHERE for a label filter: a bare key asks for the key, `key=value` for that value. */
export function labelsWhere(filter: readonly Label[]): SQL[] {
  return filter.map((l) =>
    l.value === ''
      ? sql`${conversations.labels} ? ${l.key}`
      : sql`${conversations.labels} @> ${JSON.stringify({ [l.key]: l.value })}::jsonb`,
  );
}

export type LabelChange =
  | { readonly ok: true; readonly labels: string[] }
  | { readonly ok: false; readonly code: 'not_found' | 'too_many_labels'; readonly message: string };

/**
 * Sets (`key=value` replaces a key's value) and removes labels of one conversation in one statement, so two
 * writers never lose each other's labels and the cap holds under races. Removals apply after additions.
 */
export async function changeLabels(
  db: EngineDb,
  accountId: string,
  conversationId: string,
  change: { readonly add?: readonly Label[]; readonly remove?: readonly string[] },
): Promise<LabelChange> {
  const add: Record<string, string> = {};
  for (const l of change.add ?? []) add[l.key] = l.value;
  const remove = [...(change.remove ?? [])];
  // The keys to remove travel as one JSON parameter (drizzle would spread a JS array into a list).
  const removed = sql`(SELECT coalesce(array_agg(k), '{}'::text[]) FROM jsonb_array_elements_text(${JSON.stringify(remove)}::jsonb) AS r(k))`;
  const next = sql`((${conversations.labels} || ${JSON.stringify(add)}::jsonb) - ${removed})`;
  const rows = await db
    .update(conversations)
    .set({ labels: sql`${next}`, updatedAt: new Date() })
    .where(
      and(
        eq(conversations.id, conversationId),
        eq(conversations.accountId, accountId),
        sql`(SELECT count(*) FROM jsonb_object_keys(${next})) <= ${LABELS_MAX}`,
      ),
    )
    .returning({ labels: conversations.labels });
  if (rows[0]) return { ok: true, labels: labelList(rows[0].labels) };
  const [found] = await db
    .select({ id: conversations.id })
    .from(conversations)
    .where(and(eq(conversations.id, conversationId), eq(conversations.accountId, accountId)));
  if (!found) return { ok: false, code: 'not_found', message: `conversation ${conversationId} not found` };
  return {
    ok: false,
    code: 'too_many_labels',
    message: `a conversation has at most ${LABELS_MAX} labels; remove some first`,
  };
}
