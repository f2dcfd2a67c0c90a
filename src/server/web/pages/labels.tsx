/**
 * Conversation labels on the pages: the chips of a list line (each a link that filters the list), the
 * conversation page's label bar (add one, remove each), and the two form posts behind it (post-redirect-get).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { changeLabels, LabelField, LabelKeyField, parseLabel } from '../../conversations/labels.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout } from '../layout.tsx';

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
export function LabelBar(p: { conversationId: string; labels: readonly string[] }) {
  const base = `/conversations/${p.conversationId}/labels`;
  return (
    <div class="label-bar row small" id="labels" aria-label="Labels">
      {p.labels.map((l) => (
        <span class="label-chip" data-label={l}>
          <a href={labelHref(l)} title={`Conversations labelled ${l}`}>
            {l}
          </a>
          <form method="post" action={`${base}/remove`} class="inline">
            <input type="hidden" name="key" value={parseLabel(l)?.key ?? l} />
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
    </div>
  );
}

const addForm = z.object({ label: z.string().trim().min(1, 'Type a label to add.').pipe(LabelField) });
const removeForm = z.object({ key: LabelKeyField });
const uuid = z.string().uuid();

export function labelPageRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const db = deps.db;

  const refused = (c: import('hono').Context<WebEnv>, id: string, message: string, status: 400 | 404) =>
    c.html(
      <Layout title="Could not change the labels" section="conversation" user={userName(c.get('user'))}>
        <h1>Could not change the labels</h1>
        <ErrorNote message={message} />
        <a href={`/conversations/${id}`}>Back to the conversation</a>
      </Layout>,
      status,
    );

  const change = async (c: import('hono').Context<WebEnv>, what: 'add' | 'remove') => {
    const id = c.req.param('id') ?? '';
    if (!uuid.safeParse(id).success) return refused(c, id, 'No such conversation.', 404);
    const body = await c.req.parseBody();
    const form = what === 'add' ? addForm.safeParse(body) : removeForm.safeParse(body);
    if (!form.success) return refused(c, id, form.error.issues[0]?.message ?? 'That label is not valid.', 400);
    const r = await changeLabels(
      db,
      c.get('user').account.id,
      id,
      'label' in form.data ? { add: [form.data.label] } : { remove: [form.data.key] },
    );
    if (!r.ok)
      return refused(
        c,
        id,
        r.code === 'not_found' ? 'No such conversation.' : r.message,
        r.code === 'not_found' ? 404 : 400,
      );
    return c.redirect(`/conversations/${id}#labels`, 303);
  };

  app.post('/conversations/:id/labels', (c) => change(c, 'add'));
  app.post('/conversations/:id/labels/remove', (c) => change(c, 'remove'));
  return app;
}
