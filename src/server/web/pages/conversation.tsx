/**
 * The Conversation page: the events read as a conversation (streamed text, folded thoughts, tool calls,
 * permission buttons, turn status, errors), a prompt box, interrupt, terminate, and the sandbox's state.
 */
import { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { SSEStreamingApi } from 'hono/streaming';
import { sseTail } from '../../http/sse.ts';
import { z } from 'zod';
import type { ConversationView } from '../../conversations/views.ts';
import { getAgent } from '../../agents/store.ts';
import type { EventRow, Turn } from '../../store/conversation-schema.ts';
import { listTurns } from '../../conversations/store.ts';
import { pageEvents } from '../../conversations/events-store.ts';
import { inWords } from '../actions.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { isHtmx, userName } from '../context.ts';
import { EventReader, ItemView, PermissionResolved, resolvedRequests, ToolCard, type Item } from '../event-view.tsx';
import { ErrorNote, Layout, PresenceBadge } from '../layout.tsx';
import { toHtml } from '../live.ts';
import { presenceOf, whereOf } from '../roster.ts';

const promptForm = z.object({ prompt: z.string().trim().min(1, 'Write a message first.').max(100_000) });
const answerForm = z.object({ option_id: z.string().min(1, 'Pick one of the answers.').max(500) });
const uuid = z.string().uuid();

async function allEvents(deps: WebDeps, conversationId: string, after = 0): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (let cursor = after; ; ) {
    const page = await pageEvents(deps.db, conversationId, { after: cursor, limit: 1000 });
    out.push(...page);
    if (page.length < 1000) return out;
    cursor = page[page.length - 1]!.id;
  }
}

export function ConversationStatus(p: { conv: ConversationView }) {
  const c = p.conv;
  const presence = presenceOf(c);
  return (
    <div id="conv-status" class="row small" data-status={c.status}>
      <span>
        Status: <strong class="conv-status">{c.status}</strong>
      </span>
      <PresenceBadge state={presence.state} label={presence.label} />
      {c.sandbox ? (
        <span class="muted">
          Sandbox: {c.sandbox.provider} · {c.sandbox.status}
          {whereOf(c) && c.sandbox.provider === 'runner' ? ` · ${whereOf(c)}` : ''}
        </span>
      ) : (
        <span class="muted">No sandbox</span>
      )}
      {c.usage_total.input + c.usage_total.output > 0 || c.usage_total.cost ? (
        <span class="muted" data-usage>
          Usage: {c.usage_total.input} in · {c.usage_total.output} out tokens
          {c.usage_total.cost ? ` · ${c.usage_total.cost.amount} ${c.usage_total.cost.currency}` : ''}
        </span>
      ) : null}
      {c.failure_reason ? <span class="error">{c.failure_reason}</span> : null}
    </div>
  );
}

/** What later events refer back to: each permission request (tool, options) and each tool call's latest view. */
class Asked {
  readonly requests = new Map<string, Extract<Item, { kind: 'permission' }>>();
  readonly tools = new Map<string, Extract<Item, { kind: 'tool' }>['view']>();
  note(item: Item): void {
    if (item.kind === 'permission') this.requests.set(item.requestId, item);
    else if (item.kind === 'tool') this.tools.set(item.key, item.view);
  }
}

/** Consecutive text chunks of a turn become one block; everything else renders as itself. */
function EventList(p: { items: Array<{ item: Item; row: EventRow }>; conversationId: string; turns: Map<string, Turn> }) {
  const resolved = resolvedRequests(p.items.map((i) => i.item));
  const asked = new Asked();
  for (const { item } of p.items) asked.note(item);
  const out: Child[] = [];
  let text: string[] = [];
  const flush = () => {
    if (text.length) out.push(<div class="ev text">{text.join('')}</div>);
    text = [];
  };
  for (const { item, row } of p.items) {
    if (item.kind === 'text') {
      text.push(item.text);
      continue;
    }
    flush();
    if (item.kind === 'permission' && resolved.has(item.requestId)) {
      out.push(<PermissionResolved requestId={item.requestId} tool={item.tool} />);
      continue;
    }
    // A tool call shows once, where it first appeared, merged with every update it got.
    if (item.kind === 'tool') {
      if (item.first) out.push(<ToolCard toolKey={item.key} view={asked.tools.get(item.key) ?? item.view} />);
      continue;
    }
    const askedOptions = item.kind === 'permission_done' ? asked.requests.get(item.requestId)?.options : undefined;
    out.push(<ItemView item={item} conversationId={p.conversationId} prompt={row.turnId ? p.turns.get(row.turnId)?.prompt : undefined} askedOptions={askedOptions} />);
  }
  flush();
  return <>{out}</>;
}

export function conversationRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  const load = async (accountId: string, id: string) => {
    if (!uuid.safeParse(id).success) return null;
    const got = await deps.engine.get(accountId, id);
    return got.ok ? got.value : null;
  };

  app.get('/conversations/:id', async (c) => {
    const user = c.get('user');
    const conv = await load(user.account.id, c.req.param('id'));
    if (!conv) {
      return c.html(
        <Layout title="Not found" section="conversation" user={userName(user)}>
          <h1>Conversation not found</h1>
          <p>It may have been deleted. The <a href="/">Team page</a> lists your teammates and their conversations.</p>
        </Layout>,
        404,
      );
    }
    const agent = conv.agent_id ? await getAgent(deps.db, user.account.id, conv.agent_id) : undefined;
    const rows = await allEvents(deps, conv.id);
    const turns = new Map((await listTurns(deps.db, conv.id)).map((t) => [t.id, t]));
    const reader = new EventReader();
    const items = rows.flatMap((row) => {
      const item = reader.read(row);
      return item ? [{ item, row }] : [];
    });
    const lastId = rows.at(-1)?.id ?? 0;
    const ended = conv.status === 'terminated' || conv.status === 'failed';
    return c.html(
      <Layout title={conv.title ?? agent?.name ?? 'Conversation'} section="conversation" user={userName(user)} live>
        <div hx-ext="sse" sse-connect={`/conversations/${conv.id}/stream?after=${lastId}`}>
          <h1>{conv.title ?? agent?.name ?? 'Conversation'}</h1>
          <p class="small muted">
            {agent ? `${agent.name} · ${agent.runtime} · ${agent.model}` : 'agent deleted'} · started {conv.inserted_at.slice(0, 16).replace('T', ' ')} UTC
          </p>
          <div sse-swap="status">
            <ConversationStatus conv={conv} />
          </div>
          <section aria-label="Conversation" class="card">
            <div id="events" class="events" sse-swap="ev" hx-swap="beforeend" aria-live="polite">
              <EventList items={items} conversationId={conv.id} turns={turns} />
            </div>
          </section>
        </div>
        {ended ? (
          <p class="notice">This conversation has ended. A message on the Team page starts a new one.</p>
        ) : (
          <form method="post" action={`/conversations/${conv.id}/prompts`} hx-post={`/conversations/${conv.id}/prompts`} hx-target="#prompt-result" hx-swap="innerHTML" class="card" hx-on--after-request="if(event.detail.successful && !this.querySelector('#prompt-result .error')) this.reset()">
            <label for="prompt">Message</label>
            <textarea id="prompt" name="prompt" rows={3} required></textarea>
            <div class="row" style="margin-top:6px">
              <button type="submit">Send</button>
              <div id="prompt-result" aria-live="polite"></div>
            </div>
          </form>
        )}
        <div class="row">
          <form method="post" action={`/conversations/${conv.id}/interrupt`} hx-post={`/conversations/${conv.id}/interrupt`} hx-target="#control-result" class="inline">
            <button type="submit" class="secondary" disabled={ended}>
              Interrupt
            </button>
          </form>
          <form method="post" action={`/conversations/${conv.id}/terminate`} hx-post={`/conversations/${conv.id}/terminate`} hx-target="#control-result" hx-confirm="End this conversation and destroy its sandbox?" class="inline">
            <button type="submit" class="danger" disabled={ended}>
              Terminate
            </button>
          </form>
          <div id="control-result" aria-live="polite"></div>
        </div>
      </Layout>,
    );
  });

  app.get('/conversations/:id/stream', async (c) => {
    const user = c.get('user');
    const conv = await load(user.account.id, c.req.param('id'));
    if (!conv) return c.text('conversation not found', 404);
    const after = Math.max(0, Number(c.req.query('after') ?? 0) || 0);
    // htmx's EventSource reconnects with Last-Event-ID; resume after it so nothing is appended twice.
    const resumeFrom = Math.max(after, Number(c.req.header('last-event-id') ?? 0) || 0);
    let textBlock: string | null = null;
    // Requests and tool calls the page showed before this stream began: later events refer back to them
    // (a permission's answer names its request's options; a tool update merges into its call).
    const asked = new Asked();
    const reader = new EventReader();
    let primed = resumeFrom === 0;
    const prime = async (): Promise<void> => {
      if (primed) return;
      primed = true;
      for (const r of await allEvents(deps, conv.id)) {
        if (r.id > resumeFrom) break;
        const earlier = reader.read(r);
        if (earlier) asked.note(earlier);
      }
    };
    const send = async (stream: SSEStreamingApi, row: EventRow) => {
      await prime();
      const item = reader.read(row);
      if (item) {
        const prompt = item.kind === 'turn' && item.state === 'started' && row.turnId ? (await listTurns(deps.db, conv.id)).find((t) => t.id === row.turnId)?.prompt : undefined;
        const request = item.kind === 'permission_done' ? asked.requests.get(item.requestId) : undefined;
        // A tool call's later events replace its card in place (out of band).
        const view =
          item.kind === 'tool' ? <ToolCard toolKey={item.key} view={item.view} oob={!item.first} /> : <ItemView item={item} conversationId={conv.id} prompt={prompt} askedOptions={request?.options} />;
        // A streamed answer grows inside one text block, as the page draws it on reload.
        let html: string;
        if (item.kind !== 'text') {
          textBlock = null;
          html = await toHtml(view);
        } else if (textBlock) {
          html = await toHtml(<div hx-swap-oob={`beforeend:#${textBlock}`}>{view}</div>);
        } else {
          textBlock = `text-${row.id}`;
          html = await toHtml(<div class="ev text" id={textBlock}>{view}</div>);
        }
        // Out of band: the buttons of an answered request give way to how it was answered.
        if (request) html += await toHtml(<PermissionResolved requestId={request.requestId} tool={request.tool} oob />);
        asked.note(item);
        await stream.writeSSE({ id: String(row.id), event: 'ev', data: html });
      }
      if (row.kind === 'stage') {
        const fresh = await deps.engine.get(user.account.id, conv.id);
        if (fresh.ok) await stream.writeSSE({ event: 'status', data: await toHtml(<ConversationStatus conv={fresh.value} />) });
      }
    };
    return sseTail(c, {
      source: deps.engine.feeds.conversation(conv.id),
      idOf: (row) => row.id,
      after: resumeFrom,
      send,
      onError: (e) => deps.logger.warn({ err: e }, 'conversation stream failed'),
    });
  });

  const respond = (c: import('hono').Context<WebEnv>, convId: string, r: { ok: true } | { ok: false; status: number; message: string }, okText: string) => {
    if (isHtmx(c)) return c.html(r.ok ? <span class="small">{okText}</span> : <ErrorNote message={r.message} />);
    if (r.ok) return c.redirect(`/conversations/${convId}`, 303);
    return c.html(
      <Layout title="Could not do that" section="conversation" user={userName(c.get('user'))}>
        <ErrorNote message={r.message} />
        <a href={`/conversations/${convId}`}>Back to the conversation</a>
      </Layout>,
      r.status as 400,
    );
  };

  app.post('/conversations/:id/prompts', async (c) => {
    const id = c.req.param('id');
    const form = promptForm.safeParse(await c.req.parseBody());
    if (!form.success) return respond(c, id, { ok: false, status: 400, message: form.error.issues[0]?.message ?? 'The message is invalid.' }, '');
    const r = await deps.engine.prompt(c.get('user').account.id, id, form.data.prompt);
    return respond(c, id, r.ok ? { ok: true } : inWords(r.error), 'Sent.');
  });

  app.post('/conversations/:id/interrupt', async (c) => {
    const id = c.req.param('id');
    const r = await deps.engine.interrupt(c.get('user').account.id, id);
    return respond(c, id, r.ok ? { ok: true } : inWords(r.error), 'Interrupted.');
  });

  app.post('/conversations/:id/terminate', async (c) => {
    const id = c.req.param('id');
    const r = await deps.engine.terminate(c.get('user').account.id, id);
    return respond(c, id, r.ok ? { ok: true } : inWords(r.error), 'Terminated.');
  });

  app.post('/conversations/:id/requests/:requestId', async (c) => {
    const id = c.req.param('id');
    const requestId = c.req.param('requestId');
    const form = answerForm.safeParse(await c.req.parseBody());
    // Read before answering: the answer clears the turn's pending request, and its tool names the line left behind.
    const tool = uuid.safeParse(id).success ? (await listTurns(deps.db, id)).find((t) => t.pendingPermission?.request_id === requestId)?.pendingPermission?.tool : undefined;
    const r = form.success
      ? await deps.engine.answerPermission(c.get('user').account.id, id, requestId, form.data.option_id)
      : ({ ok: false, error: { code: 'option_id_required', message: form.error.issues[0]?.message ?? 'Pick an answer.' } } as const);
    if (isHtmx(c)) {
      // The answer itself arrives on the page's live stream as "Answered: …".
      return c.html(
        r.ok ? (
          <PermissionResolved requestId={requestId} tool={tool ?? 'a tool'} />
        ) : (
          <div class="ev perm">
            <ErrorNote message={inWords(r.error).message} />
          </div>
        ),
      );
    }
    return respond(c, id, r.ok ? { ok: true } : inWords(r.error), 'Answered.');
  });

  return app;
}
