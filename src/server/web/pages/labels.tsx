/**
 * Conversation labels on the pages: the chips of a list line (each a link that filters the list), the
 * conversation page's label bar (add one, remove each), and the form post behind it (post-redirect-get).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { LABEL_RULE, LabelKeyField, LABELS_MAX, parseLabel } from '../../conversations/labels.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { Layout } from '../layout.tsx';

/** The list filtered by one label. */
export const labelHref = (label: string): string => `/conversations?${new URLSearchParams({ label })}`;

/** A list line's labels: small chips, each filtering the list by itself. */
export function LabelChips(p: { labels: readonly string[] }) {
  if (p.labels.length === 0) return null;
  return (
    <span class="label-chips">
      {p.labels.map((l) => (
        <a class="label-chip" href={labelHref(l)} data-label={l} title={`Conversations labelled ${l}`}>
          {l}
        </a>
      ))}
    </span>
  );
}

/** The conversation page's labels: each with a remove button, and a box to add one. */
export function LabelBar(p: { conversationId: string; labels: readonly string[]; error?: string | undefined }) {
  const error = p.error && p.error in LABEL_ERRORS ? LABEL_ERRORS[p.error as LabelError] : undefined;
  const base = `/conversations/${p.conversationId}/labels`;
  return (
    <div class="label-bar row small" id="labels" aria-label="Labels">
      {p.labels.map((l) => (
        <span class="label-chip" data-label={l}>
          <a href={labelHref(l)} title={`Conversations labelled ${l}`}>
            {l}
          </a>
          {/* Not confirmed: a label is put back in one step, unlike a delete. */}
          <form method="post" action={base} class="inline">
            <input type="hidden" name="remove" value={parseLabel(l)?.key ?? l} />
            <button type="submit" class="chip-remove" aria-label={`Remove label ${l}`} title="Remove">
              ×
            </button>
          </form>
        </span>
      ))}
      <form method="post" action={base} class="label-add row">
        <label for="label-new" class="visually-hidden">
          Add a label
        </label>
        <input
          id="label-new"
          name="label"
          type="text"
          maxlength={200}
          placeholder={p.labels.length ? 'label, or key=value' : 'Add a label: key or key=value'}
          autocomplete="off"
        />
        <button type="submit" class="secondary small-button">
          Add label
        </button>
      </form>
      {error ? (
        <p class="error small" role="alert" id="label-error">
          {error}
        </p>
      ) : null}
    </div>
  );
}

/** Why the last change was refused, as the label bar says it. */
export const LABEL_ERRORS = {
  empty: 'Type a label to add.',
  invalid: `That is not a label: ${LABEL_RULE}.`,
  too_many: `A conversation has at most ${LABELS_MAX} labels; remove one first.`,
} as const;
export type LabelError = keyof typeof LABEL_ERRORS;
const removeForm = z.object({ remove: LabelKeyField });
const uuid = z.string().uuid();

export function labelPageRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  const notFound = (c: import('hono').Context<WebEnv>) =>
    c.html(
      <Layout title="Not found" section="conversation" user={userName(c.get('user'))}>
        <h1>Conversation not found</h1>
        <p>
          It may have been deleted. <a href="/conversations">All conversations</a>
        </p>
      </Layout>,
      404,
    );

  // One form post for both: `label` adds one, `remove` takes a key away. A refusal goes back to the
  // page too (post-redirect-get), named by a code the label bar says in words.
  app.post('/conversations/:id/labels', async (c) => {
    const id = c.req.param('id');
    if (!uuid.safeParse(id).success) return notFound(c);
    const body = await c.req.parseBody();
    const back = (error?: LabelError) =>
      c.redirect(`/conversations/${id}${error ? `?${new URLSearchParams({ label_error: error })}` : ''}#labels`, 303);
    if ('remove' in body) {
      const form = removeForm.safeParse(body);
      if (!form.success) return back('invalid');
      const r = await deps.engine.changeLabels(c.get('user').account.id, id, { remove: [form.data.remove] });
      return r.ok || r.code !== 'not_found' ? back() : notFound(c);
    }
    const text = typeof body.label === 'string' ? body.label.trim() : '';
    if (text === '') return back('empty');
    const label = parseLabel(text);
    if (!label) return back('invalid');
    const r = await deps.engine.changeLabels(c.get('user').account.id, id, { add: [label] });
    if (r.ok) return back();
    return r.code === 'not_found' ? notFound(c) : back('too_many');
  });
  return app;
}
