/**
 * The Conversation page: the events read as a conversation (streamed text, folded thoughts, tool calls,
 * permission buttons, turn status, errors), the files the agent changed, a prompt box, interrupt,
 * terminate, and the sandbox's state.
 * Its status line, message box and side list are in conversation-parts.tsx.
 */
import { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { SSEStreamingApi } from 'hono/streaming';
import { sseTail } from '../../http/sse.ts';
import { z } from 'zod';
import { getAgent } from '../../agents/service.ts';
import type { EventRow, Turn } from '../../store/conversation-schema.ts';
import { eventPage, turnsOf } from '../../conversations/history.ts';
import { inWords } from '../actions.ts';
import { listConversationPage, waitingForApproval } from '../../conversations/listing.ts';
import { titleOf } from './conversations.tsx';
import { messageField } from '../../conversations/limits.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { isHtmx, userName } from '../context.ts';
import {
  AgentText,
  EventReader,
  ItemView,
  PermissionResolved,
  resolvedRequests,
  ToolCard,
  type Item,
} from '../event-view.tsx';
import { ErrorNote, Layout, when } from '../layout.tsx';
import { Composer, ConversationStatus, listed, Recent, RecentItem, WAITING_PREFIX } from './conversation-parts.tsx';
import { AgentLine } from './conversation-parts.tsx';

import { toHtml } from '../live.ts';
import { ForkButton, MoveControl, moveTargets } from './relocate.tsx';
import { LabelBar } from './labels.tsx';
import { fileChanges, FilesPanel } from './files-panel.tsx';
import { hasRepository, lastPush, PushControl } from './repository.tsx';
import { sandboxHomes } from '../home-paths.ts';
import { formImages, imageFields } from '../form-images.ts';

const promptForm = z.object({ prompt: z.string().trim().pipe(messageField), image: imageFields });
const answerForm = z.object({ option_id: z.string().min(1, 'Pick one of the answers.').max(500) });
const uuid = z.string().uuid();

async function allEvents(deps: WebDeps, conversationId: string, after = 0): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (let cursor = after; ; ) {
    const page = await eventPage(deps.db, conversationId, { after: cursor, limit: 1000 });
    out.push(...page);
    if (page.length < 1000) return out;
    cursor = page[page.length - 1]!.id;
  }
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
function EventList(p: {
  items: Array<{ item: Item; row: EventRow }>;
  conversationId: string;
  turns: Map<string, Turn>;
  /** The turns "Fork from here" is offered under: those with a kept checkpoint, and the newest completed one. */
  forkable: (turnId: string) => boolean;
}) {
  const resolved = resolvedRequests(p.items.map((i) => i.item));
  const asked = new Asked();
  for (const { item } of p.items) asked.note(item);
  const out: Child[] = [];
  let text: string[] = [];
  const flush = () => {
    if (text.length) out.push(<AgentText text={text.join('')} />);
    text = [];
  };
  for (const { item, row } of p.items) {
    if (item.kind === 'text') {
      text.push(item.text);
      continue;
    }
    // A tool call shows once, where it first appeared, merged with every update it got; its later updates
    // leave the text around them as one block.
    if (item.kind === 'tool' && !item.first) continue;
    flush();
    if (item.kind === 'permission' && resolved.has(item.requestId)) {
      out.push(<PermissionResolved requestId={item.requestId} tool={item.tool} />);
      continue;
    }
    if (item.kind === 'tool') {
      out.push(<ToolCard toolKey={item.key} view={asked.tools.get(item.key) ?? item.view} />);
      continue;
    }
    const askedOptions = item.kind === 'permission_done' ? asked.requests.get(item.requestId)?.options : undefined;
    out.push(
      <ItemView
        item={item}
        conversationId={p.conversationId}
        turn={row.turnId ? p.turns.get(row.turnId) : undefined}
        askedOptions={askedOptions}
      />,
    );
    if (item.kind === 'turn' && item.state === 'done' && row.turnId && p.forkable(row.turnId))
      out.push(<ForkButton conversationId={p.conversationId} turnId={row.turnId} />);
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
          <p>
            It may have been deleted. The <a href="/">Team page</a> lists your teammates and their conversations.
          </p>
        </Layout>,
        404,
      );
    }
    const agent = conv.agent_id ? await getAgent(deps.db, user.account.id, conv.agent_id) : undefined;
    const rows = await allEvents(deps, conv.id);
    const turns = new Map((await turnsOf(deps.db, conv.id)).map((t) => [t.id, t]));
    // The newest completed turn's checkpoint may still be being taken: its button is offered all the same.
    const kept = await deps.engine.forkableTurns(conv.id);
    const newest = [...turns.values()].filter((t) => t.status === 'completed').at(-1)?.id;
    const reader = new EventReader(sandboxHomes(conv));
    const items = rows.flatMap((row) => {
      const item = reader.read(row);
      return item ? [{ item, row }] : [];
    });
    const lastId = rows.at(-1)?.id ?? 0;
    const seen = new Asked();
    for (const { item } of items) seen.note(item);
    const files = fileChanges(seen.tools.values(), conv);
    // Opened: everything so far has been seen (the list's unread mark and filter go by this).
    await deps.engine.markRead(user.account.id, conv.id);
    const recent = await listConversationPage(deps.db, user.account.id, { limit: 15 });
    const waiting = await waitingForApproval(deps.db, conv.id);
    // The side list always holds this conversation: the live stream updates its line in place.
    const side = recent.rows.some((r) => r.id === conv.id)
      ? recent.rows
      : [listed(conv, agent?.name ?? null, waiting), ...recent.rows];
    const heading =
      conv.title ??
      (conv.first_prompt ? titleOf({ title: null, firstPrompt: conv.first_prompt }) : (agent?.name ?? 'Conversation'));
    return c.html(
      <Layout
        title={`${waiting ? WAITING_PREFIX : ''}${heading}`}
        section="conversation"
        user={userName(user)}
        live
        mainClass="with-recent"
      >
        <Recent rows={side} current={conv.id} />
        <div class="conversation">
          <div hx-ext="sse" sse-connect={`/conversations/${conv.id}/stream?after=${lastId}`}>
            <h1 class="conv-heading">{heading}</h1>
            <p class="small muted">
              <AgentLine agent={agent} model={conv.model} /> · started {when(conv.inserted_at)}{' '}
              <button type="button" id="notify-toggle" class="secondary small-button" hidden>
                Notify me when it needs me
              </button>
            </p>
            <LabelBar conversationId={conv.id} labels={conv.labels} error={c.req.query('label_error')} />
            <div sse-swap="status">
              <ConversationStatus conv={conv} waiting={waiting} />
            </div>
            <MoveControl conv={conv} runners={deps.runnersEnabled ? await moveTargets(deps, user.account.id) : []} />
            <PushControl
              conv={conv}
              hasRepository={await hasRepository(deps, user.account.id, conv)}
              pushed={lastPush(rows)}
              error={c.req.query('push_error')}
            />
            <FilesPanel files={files} />
            <section aria-label="Conversation" class="card">
              <div id="events" class="events" sse-swap="ev" hx-swap="beforeend" aria-live="polite">
                <EventList
                  items={items}
                  conversationId={conv.id}
                  turns={turns}
                  forkable={(t) => t === newest || kept.has(t)}
                />
              </div>
            </section>
          </div>
          <button type="button" id="new-messages" class="pill" hidden>
            New messages ↓
          </button>
          <Composer conv={conv} agentName={agent?.name ?? null} />
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
    let blockText = '';
    let endedShown = conv.status === 'terminated' || conv.status === 'failed';
    let filesSent: string | null = null;
    const agentName = conv.agent_id ? ((await getAgent(deps.db, user.account.id, conv.agent_id))?.name ?? null) : null;
    // Requests and tool calls the page showed before this stream began: later events refer back to them
    // (a permission's answer names its request's options; a tool update merges into its call).
    const asked = new Asked();
    const reader = new EventReader(sandboxHomes(conv));
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
        const turn =
          item.kind === 'turn' && item.state === 'started' && row.turnId
            ? (await turnsOf(deps.db, conv.id)).find((t) => t.id === row.turnId)
            : undefined;
        const request = item.kind === 'permission_done' ? asked.requests.get(item.requestId) : undefined;
        // A tool call's later events replace its card in place (out of band).
        const view =
          item.kind === 'tool' ? (
            <ToolCard toolKey={item.key} view={item.view} oob={!item.first} />
          ) : (
            <ItemView item={item} conversationId={conv.id} turn={turn} askedOptions={request?.options} />
          );
        // A streamed answer grows inside one text block, as the page draws it on reload; once the block is
        // complete it is redrawn as Markdown, as a reload would show it.
        let html: string;
        if (item.kind === 'tool' && !item.first) {
          html = await toHtml(view);
        } else if (item.kind !== 'text') {
          html = textBlock ? await toHtml(<AgentText id={textBlock} text={blockText} oob />) : '';
          textBlock = null;
          html += await toHtml(view);
        } else if (textBlock) {
          blockText += item.text;
          html = await toHtml(<div hx-swap-oob={`beforeend:#${textBlock}`}>{view}</div>);
        } else {
          textBlock = `text-${row.id}`;
          blockText = item.text;
          html = await toHtml(
            <div class="ev text" id={textBlock}>
              {view}
            </div>,
          );
        }
        if (item.kind === 'turn' && item.state === 'done' && row.turnId)
          html += await toHtml(<ForkButton conversationId={conv.id} turnId={row.turnId} />);
        // Out of band: the buttons of an answered request give way to how it was answered.
        if (request) html += await toHtml(<PermissionResolved requestId={request.requestId} tool={request.tool} oob />);
        asked.note(item);
        await stream.writeSSE({ id: String(row.id), event: 'ev', data: html });
      }
      if (row.kind === 'stage') {
        // The page is open on this conversation: what it just showed counts as seen.
        await deps.engine.markRead(user.account.id, conv.id);
        const fresh = await deps.engine.get(user.account.id, conv.id);
        if (fresh.ok) {
          const waiting = await waitingForApproval(deps.db, conv.id);
          let status = await toHtml(<ConversationStatus conv={fresh.value} waiting={waiting} />);
          // What the turn's edits changed so far; sent again only when it changed, so a file the reader
          // opened stays open.
          const files = await toHtml(<FilesPanel files={fileChanges(asked.tools.values(), fresh.value)} oob />);
          if (files !== filesSent) status += files;
          filesSent = files;
          // The side list's line for this conversation says the same.
          status += await toHtml(<RecentItem c={listed(fresh.value, agentName, waiting)} current={conv.id} oob />);
          // Ended here or elsewhere: the message box and controls give way to the ended notice.
          const ended = fresh.value.status === 'terminated' || fresh.value.status === 'failed';
          if (ended && !endedShown) {
            endedShown = true;
            status += await toHtml(<Composer conv={fresh.value} agentName={agentName} oob />);
          }
          await stream.writeSSE({ event: 'status', data: status });
        }
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

  const respond = (
    c: import('hono').Context<WebEnv>,
    convId: string,
    r: { ok: true } | { ok: false; status: number; message: string },
    okText: string,
  ) => {
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
    // `all`: the message box sends each image as its own `image` field.
    const form = promptForm.safeParse(await c.req.parseBody({ all: true }));
    if (!form.success)
      return respond(
        c,
        id,
        { ok: false, status: 400, message: form.error.issues[0]?.message ?? 'The message is invalid.' },
        '',
      );
    const images = formImages(form.data.image);
    if (!images.ok) return respond(c, id, images, '');
    const r = await deps.engine.prompt(c.get('user').account.id, id, form.data.prompt, images.value);
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
    // The whole page changes (no message box, no controls): htmx reloads it rather than patching pieces.
    if (r.ok && isHtmx(c)) {
      c.header('HX-Refresh', 'true');
      return c.html(<span class="small">Ended.</span>);
    }
    return respond(c, id, r.ok ? { ok: true } : inWords(r.error), 'Terminated.');
  });

  app.post('/conversations/:id/requests/:requestId', async (c) => {
    const id = c.req.param('id');
    const requestId = c.req.param('requestId');
    const form = answerForm.safeParse(await c.req.parseBody());
    // Read before answering: the answer clears the turn's pending request, and its tool names the line left behind.
    const tool = uuid.safeParse(id).success
      ? (await turnsOf(deps.db, id)).find((t) => t.pendingPermission?.request_id === requestId)?.pendingPermission?.tool
      : undefined;
    const r = form.success
      ? await deps.engine.answerPermission(c.get('user').account.id, id, requestId, form.data.option_id)
      : ({
          ok: false,
          error: { code: 'option_id_required', message: form.error.issues[0]?.message ?? 'Pick an answer.' },
        } as const);
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
