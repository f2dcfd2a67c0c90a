/**
 * The Conversations page: every conversation of the account, newest activity first, with filters by agent,
 * status, labels and unread, a title search and keyset paging; a new conversation with any agent; delete.
 */
import { inLine } from '../words.ts';
import { Hono } from 'hono';
import { z } from 'zod';
import {
  agentChoices,
  CONVERSATION_STATUSES,
  listConversationPage,
  type ConversationStatus,
  type ListedConversation,
} from '../../conversations/listing.ts';
import { inWords } from '../actions.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';
import { previewOf, type Preview } from '../roster.ts';
import { InlineMd } from '../event-view.tsx';
import { BranchPickHost, branchChoice } from './repository.tsx';
import { ModelPickHost } from './model-pick.tsx';
import { getAgent } from '../../agents/service.ts';
import { lastTurnAndReply } from '../../team/reads.ts';
import { MESSAGE_LIMIT, messageField } from '../../conversations/limits.ts';
import { LABEL_RULE, LabelFilterParam } from '../../conversations/labels.ts';
import { LabelChips } from './labels.tsx';

export const PAGE_SIZE = 25;

/** Conversation statuses as a reader says them. */
export const STATUS_WORDS: Readonly<Record<ConversationStatus, string>> = {
  pending: 'starting',
  running: 'working',
  idle: 'waiting for you',
  failed: 'failed',
  terminated: 'ended',
};

const filterQuery = z.object({
  agent: z.string().uuid().optional().catch(undefined),
  status: z.enum(CONVERSATION_STATUSES).optional().catch(undefined),
  q: z.string().max(200).optional().catch(undefined),
  unread: z.literal('1').optional().catch(undefined),
  label: z.string().max(1000).optional().catch(undefined),
  after: z.string().max(200).optional().catch(undefined),
});

const newForm = z.object({
  agent_id: z.string().uuid('Pick an agent.'),
  prompt: messageField.optional().or(z.literal('').transform(() => undefined)),
  branch: branchChoice,
  model: z
    .string()
    .trim()
    .max(200, 'A model is at most 200 characters.')
    .optional()
    .transform((v) => (v ? v : undefined)),
  model_agent: z.string().max(100).optional(),
});

/** The line a conversation is known by: its title, else its first message, else nothing yet. */
export const titleOf = (c: { title: string | null; firstPrompt: string | null }): string => {
  const t = (c.title ?? c.firstPrompt ?? '').replace(/\s+/g, ' ').trim();
  return t === '' ? 'New conversation' : t.length > 90 ? `${t.slice(0, 89)}…` : t;
};

/** The DOM id of a conversation's line in a list (the conversation page's side list updates it live). */
export const itemDomId = (id: string): string => `conv-item-${id}`;

/** The last message in a line: what the agent said last, else what the user did. */
function PreviewText(p: { preview: Preview; agentName: string | null }) {
  const v = p.preview;
  if (!v) return null;
  const line = v.text.replace(/\s+/g, ' ').trim();
  const who = p.agentName ?? 'The agent';
  const lead =
    v.kind === 'asking'
      ? `${who} asks permission: `
      : v.kind === 'typing'
        ? `${who} is writing…`
        : `${v.kind === 'you' ? 'You' : who}: `;
  return (
    <span class="conv-preview small" data-preview={v.kind}>
      {lead}
      {v.kind === 'typing' ? null : <InlineMd text={line} />}
    </span>
  );
}

/** Each listed conversation's last exchange, for the preview line. */
export async function previews(deps: WebDeps, rows: readonly ListedConversation[]): Promise<Map<string, Preview>> {
  const got = await Promise.all(
    rows.map(async (r) => {
      const { turn, reply } = await lastTurnAndReply(deps.db, r.id);
      return [r.id, previewOf(turn, reply)] as const;
    }),
  );
  return new Map(got);
}

export function ConversationItem(p: {
  c: ListedConversation;
  current?: string | undefined;
  oob?: boolean | undefined;
  preview?: Preview | undefined;
}) {
  const c = p.c;
  return (
    <li
      class={`conv-item${p.c.id === p.current ? ' current' : ''}`}
      data-conversation-id={c.id}
      data-status={c.status}
      id={itemDomId(c.id)}
      data-waiting={c.waiting ? 'true' : undefined}
      hx-swap-oob={p.oob ? 'true' : undefined}
    >
      <a href={`/conversations/${c.id}`} aria-current={p.c.id === p.current ? 'page' : undefined}>
        {c.unread ? (
          <span class="unread" title="New since you last looked">
            ●
          </span>
        ) : null}
        <span class="conv-title">{titleOf(c)}</span>
      </a>
      {p.preview ? <PreviewText preview={p.preview} agentName={c.agentName} /> : null}
      <LabelChips labels={c.labels} />
      <span class="small muted conv-meta">
        {c.agentName ?? 'deleted agent'} ·{' '}
        {c.waiting ? (
          <span class="badge asking">waiting for your approval</span>
        ) : c.queuePosition ? (
          <span class="badge queued" data-queue-position={String(c.queuePosition)}>
            {inLine(c.queuePosition)}
          </span>
        ) : (
          <span class={`status-${c.status}`}>{STATUS_WORDS[c.status]}</span>
        )}{' '}
        · {c.turnCount === 1 ? '1 turn' : `${c.turnCount} turns`} · {when(c.lastActiveAt)}
      </span>
    </li>
  );
}

function NewConversation(p: {
  agents: ReadonlyArray<{ id: string; name: string }>;
  selected?: string | undefined;
  error?: string | undefined;
}) {
  if (p.agents.length === 0) {
    return (
      <p class="card">
        No agents yet. <a href="/agents/new">Create an agent</a> to start a conversation.
      </p>
    );
  }
  return (
    <form method="post" action="/conversations/new" class="card" id="new-conversation">
      <h2>New conversation</h2>
      <label for="new-agent">Agent</label>
      <select id="new-agent" name="agent_id">
        {p.agents.map((a) => (
          <option value={a.id} selected={a.id === p.selected}>
            {a.name}
          </option>
        ))}
      </select>
      <ModelPickHost />
      <BranchPickHost />
      <label for="new-prompt">First message (optional)</label>
      <textarea id="new-prompt" name="prompt" rows={2} maxlength={MESSAGE_LIMIT}></textarea>
      <ErrorNote message={p.error} />
      <p>
        <button type="submit">Start conversation</button>
      </p>
    </form>
  );
}

export function conversationListRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  const page = async (c: import('hono').Context<WebEnv>, error?: string) => {
    const user = c.get('user');
    const f = filterQuery.parse(c.req.query());
    const labelFilter = f.label ? LabelFilterParam.safeParse(f.label) : null;
    const agents = await agentChoices(deps.db, user.account.id);
    const listing = await listConversationPage(deps.db, user.account.id, {
      agentId: f.agent,
      statuses: f.status ? [f.status] : undefined,
      search: f.q,
      unread: f.unread === '1',
      labels: labelFilter?.success ? labelFilter.data : undefined,
      after: f.after,
      limit: PAGE_SIZE,
    });
    const keep = new URLSearchParams();
    if (f.agent) keep.set('agent', f.agent);
    if (f.status) keep.set('status', f.status);
    if (f.q) keep.set('q', f.q);
    if (f.unread) keep.set('unread', '1');
    if (f.label) keep.set('label', f.label);
    const filtered = keep.size > 0;
    const lines = await previews(deps, listing.rows);
    const older = listing.next ? `/conversations?${new URLSearchParams([...keep, ['after', listing.next]])}` : null;
    return c.html(
      <Layout title="Conversations" section="conversations" user={userName(user)}>
        <h1>Conversations</h1>
        {agents.length > 0 ? (
          <p class="jump-new">
            <a href="#new-conversation">Start a new conversation</a>
          </p>
        ) : null}
        <div class="conv-page">
          <NewConversation agents={agents} selected={f.agent} error={error} />
          <form method="get" action="/conversations" class="filters row" role="search">
            <div>
              <label for="f-agent">Filter by agent</label>
              <select id="f-agent" name="agent">
                <option value="">All agents</option>
                {agents.map((a) => (
                  <option value={a.id} selected={a.id === f.agent}>
                    {a.name}
                  </option>
                ))}
              </select>
            </div>
            <div>
              <label for="f-status">Filter by status</label>
              <select id="f-status" name="status">
                <option value="">Any status</option>
                {CONVERSATION_STATUSES.map((s) => (
                  <option value={s} selected={s === f.status}>
                    {STATUS_WORDS[s]}
                  </option>
                ))}
              </select>
            </div>
            <div class="grow">
              <label for="f-q">Search titles</label>
              <input id="f-q" name="q" type="search" value={f.q ?? ''} maxlength={200} />
            </div>
            <div>
              <label for="f-label">Labels</label>
              <input
                id="f-label"
                name="label"
                type="search"
                value={f.label ?? ''}
                maxlength={1000}
                placeholder="key or key=value, …"
              />
            </div>
            <div class="check">
              <input id="f-unread" name="unread" type="checkbox" value="1" checked={f.unread === '1'} />
              <label for="f-unread">Unread only</label>
            </div>
            <button type="submit" class="secondary">
              Filter
            </button>
            {filtered ? <a href="/conversations">Clear</a> : null}
          </form>
          {labelFilter && !labelFilter.success ? (
            <ErrorNote message={`The label filter is not valid: ${LABEL_RULE}.`} />
          ) : null}
          {listing.rows.length === 0 ? (
            <p class="muted" id="no-conversations">
              {filtered || f.after
                ? 'No conversation matches.'
                : 'No conversations yet: start one above, or message a teammate on the Team page.'}
            </p>
          ) : (
            <ul class="conv-list card" aria-label="Conversations, newest activity first">
              {listing.rows.map((r) => (
                <li class="conv-row">
                  <ul class="plain">
                    <ConversationItem c={r} preview={lines.get(r.id)} />
                  </ul>
                  <form
                    method="post"
                    action={`/conversations/${r.id}/delete`}
                    class="inline"
                    onsubmit="return confirm('Delete this conversation, its history and its computer?')"
                  >
                    <button type="submit" class="danger small-button" aria-label={`Delete conversation ${titleOf(r)}`}>
                      Delete
                    </button>
                  </form>
                </li>
              ))}
            </ul>
          )}
        </div>
        <nav class="row pager" aria-label="Pages">
          {f.after ? <a href={`/conversations${keep.size ? `?${keep}` : ''}`}>Newest</a> : null}
          {older ? (
            <a href={older} rel="next">
              Older conversations
            </a>
          ) : null}
        </nav>
      </Layout>,
      error ? 400 : 200,
    );
  };

  app.get('/conversations', (c) => page(c));

  app.post('/conversations/new', async (c) => {
    const user = c.get('user');
    const form = newForm.safeParse(await c.req.parseBody());
    if (!form.success) return page(c, form.error.issues[0]?.message ?? 'The form is incomplete.');
    // The field comes prefilled with the agent's model: left as it is, the conversation follows the agent's.
    const picked = form.data.model_agent === form.data.agent_id ? form.data.model : undefined;
    const agent = picked ? await getAgent(deps.db, user.account.id, form.data.agent_id) : undefined;
    const model = picked !== agent?.model ? picked : undefined;
    const created = await deps.engine.create(user.account.id, {
      agentId: form.data.agent_id,
      prompt: form.data.prompt,
      model,
      ...(form.data.branch ? { branch: form.data.branch.branch, repository: form.data.branch.repository } : {}),
    });
    if (!created.ok) return page(c, inWords(created.error).message);
    return c.redirect(`/conversations/${created.value.id}`, 303);
  });

  app.post('/conversations/:id/delete', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const r = z.string().uuid().safeParse(id).success ? await deps.engine.delete(user.account.id, id) : null;
    if (r && !r.ok) return page(c, inWords(r.error).message);
    return c.redirect('/conversations', 303);
  });

  return app;
}
