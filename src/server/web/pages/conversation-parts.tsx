/**
 * The Conversation page's header and footer pieces: the status line (with "waiting for your approval"),
 * the message box and turn controls, and the side list of recent conversations with its live line.
 */
import type { ConversationView } from '../../conversations/views.ts';
import type { ListedConversation } from '../../conversations/listing.ts';
import { MESSAGE_LIMIT } from '../../conversations/limits.ts';
import { IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGES } from '../../../wire/images.ts';
import { explainExits, inLine } from '../words.ts';
import { PresenceBadge } from '../layout.tsx';
import { presenceOf, whereOf } from '../roster.ts';
import { ConversationItem, STATUS_WORDS } from './conversations.tsx';

const COMPUTER_WORDS: Readonly<Record<string, string>> = {
  pending: 'moved, starts with the next message',
  starting: 'starting',
  ready: 'running',
  suspended: 'asleep',
  terminated: 'removed',
  failed: 'failed',
};

/** The page's title while a permission request waits (app.js keeps it so as the status changes live). */
export const WAITING_PREFIX = 'Waiting for your approval · ';

/** Who runs the conversation: its agent, runtime and model, the conversation's own when it differs from the agent's. */
export function AgentLine(p: {
  agent: { name: string; runtime: string; model: string } | undefined;
  model: string | null;
}) {
  const a = p.agent;
  if (!a) return <>agent deleted</>;
  if (!p.model || p.model === a.model) return <>{`${a.name} · ${a.runtime} · ${a.model}`}</>;
  return (
    <>
      {`${a.name} · ${a.runtime} · `}
      <span id="conv-model" title={`The agent's model is ${a.model}`}>
        {p.model} (picked for this conversation)
      </span>
    </>
  );
}

/** The conversation's state in the header; `waiting`: a permission request waits for the user's answer. */
export function ConversationStatus(p: { conv: ConversationView; waiting: boolean }) {
  const c = p.conv;
  const presence = presenceOf(c);
  const where = whereOf(c);
  return (
    <div id="conv-status" class="row small" data-status={c.status} data-waiting={p.waiting ? 'true' : 'false'}>
      <span>
        Status:{' '}
        {p.waiting ? (
          <strong class="conv-status badge asking" role="alert">
            waiting for your approval
          </strong>
        ) : c.queue ? (
          <strong class="conv-status badge queued" data-queue-position={String(c.queue.position)}>
            {inLine(c.queue.position)}
          </strong>
        ) : (
          <strong class="conv-status">{STATUS_WORDS[c.status]}</strong>
        )}
      </span>
      {/* While it waits for the user, "working" beside it would contradict it. */}
      {p.waiting ? null : <PresenceBadge state={presence.state} label={presence.label} />}
      {c.sandbox ? (
        <span class="muted" id="placement">
          Computer: {COMPUTER_WORDS[c.sandbox.status] ?? c.sandbox.status}
          {where ? ` · ${where}` : ''}
        </span>
      ) : (
        <span class="muted">No computer yet: the first message starts one</span>
      )}
      {c.usage_total.input + c.usage_total.output > 0 || c.usage_total.cost ? (
        <span class="muted" data-usage>
          Usage: {c.usage_total.input} in · {c.usage_total.output} out tokens
          {c.usage_total.cost ? ` · ${c.usage_total.cost.amount} ${c.usage_total.cost.currency}` : ''}
        </span>
      ) : null}
      {c.failure_reason ? <span class="error">{explainExits(c.failure_reason)}</span> : null}
    </div>
  );
}

/**
 * The message box and the turn controls, or the notice that the conversation has ended. Sent again
 * out-of-band when the conversation ends (here or elsewhere), so no stale Send or Interrupt stays.
 */
export function Composer(p: { conv: ConversationView; agentName: string | null; oob?: boolean }) {
  const id = p.conv.id;
  if (p.conv.status === 'terminated' || p.conv.status === 'failed') {
    return (
      <div id="composer" hx-swap-oob={p.oob ? 'true' : undefined} data-ended="true">
        <p class="notice" role="status">
          This conversation has {p.conv.status === 'failed' ? 'stopped after an error' : 'ended'}.{' '}
          {p.conv.agent_id && p.agentName ? (
            <form method="post" action="/conversations/new" class="inline">
              <input type="hidden" name="agent_id" value={p.conv.agent_id} />
              <button type="submit" class="secondary">
                New conversation with {p.agentName}
              </button>
            </form>
          ) : (
            <a href="/conversations">Back to your conversations</a>
          )}
        </p>
      </div>
    );
  }
  return (
    <div id="composer" hx-swap-oob={p.oob ? 'true' : undefined}>
      <form
        method="post"
        action={`/conversations/${id}/prompts`}
        hx-post={`/conversations/${id}/prompts`}
        hx-target="#prompt-result"
        hx-swap="innerHTML"
        class="card"
        data-images=""
        data-max-images={String(MAX_IMAGES)}
        data-max-image-bytes={String(MAX_IMAGE_BYTES)}
        hx-on--after-request="if(event.detail.successful && !this.querySelector('#prompt-result .error')) this.reset()"
      >
        <label for="prompt">Message</label>
        <textarea
          id="prompt"
          name="prompt"
          rows={3}
          required
          maxlength={MESSAGE_LIMIT}
          data-enter-sends=""
          aria-describedby="prompt-keys"
        ></textarea>
        {/* Images (app.js): pasted, dropped or picked, checked here as the server checks them, each a chip
            holding its hidden `image` field; without the script the box sends text only. */}
        <ul class="plain image-chips" id="prompt-images" aria-label="Images to send" hidden></ul>
        <p class="error small" id="image-note" role="alert" hidden></p>
        <div class="row" style="margin-top:6px">
          <button type="submit">Send</button>
          <label class="button secondary small-button" id="add-images" hidden>
            Add images
            <input type="file" class="visually-hidden" accept={IMAGE_TYPES.join(',')} multiple />
          </label>
          <span class="muted small" id="prompt-keys">
            Enter sends · Shift+Enter for a new line
            <span data-image-hint="" hidden>
              {' '}
              · paste or drop images (PNG, JPEG, GIF, WebP; up to {MAX_IMAGES}, {MAX_IMAGE_BYTES / 1024 / 1024} MB each)
            </span>
          </span>
          <div id="prompt-result" aria-live="polite"></div>
        </div>
      </form>
      <div class="row">
        <form
          method="post"
          action={`/conversations/${id}/interrupt`}
          hx-post={`/conversations/${id}/interrupt`}
          hx-target="#control-result"
          class="inline"
        >
          <button type="submit" class="secondary">
            Interrupt
          </button>
        </form>
        <form
          method="post"
          action={`/conversations/${id}/terminate`}
          hx-post={`/conversations/${id}/terminate`}
          hx-target="#control-result"
          hx-confirm="End this conversation and remove its computer?"
          class="inline"
        >
          <button type="submit" class="danger">
            Terminate
          </button>
        </form>
        <div id="control-result" aria-live="polite"></div>
      </div>
    </div>
  );
}

/** The current conversation's line in the side list, sent again out of band as its status changes. */
export function RecentItem(p: { c: ListedConversation; current: string; oob?: boolean }) {
  return <ConversationItem c={p.c} current={p.current} oob={p.oob} />;
}

/** The listing's line for a conversation the page already holds. */
export function listed(c: ConversationView, agentName: string | null, waiting: boolean): ListedConversation {
  return {
    id: c.id,
    title: c.title,
    firstPrompt: c.first_prompt,
    status: c.status,
    agentId: c.agent_id,
    agentName,
    turnCount: c.turn_count,
    lastActiveAt: new Date(c.last_active_at),
    unread: false,
    waiting,
    labels: c.labels,
    queuePosition: c.queue?.position ?? null,
  };
}

/** Recent conversations beside the transcript (shown on wide screens only). */
export function Recent(p: { rows: readonly ListedConversation[]; current: string }) {
  return (
    <aside class="recent" aria-label="Recent conversations">
      <h2 class="small">Recent conversations</h2>
      <ul class="plain">
        {p.rows.map((r) => (
          <ConversationItem c={r} current={p.current} />
        ))}
      </ul>
      <a class="small" href="/conversations">
        All conversations
      </a>
    </aside>
  );
}
