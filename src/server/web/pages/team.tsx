/**
 * The Team page: the team as the API lists it (each member on its team conversation), then the
 * account's other agents with "Add to team"; presence, what each is doing and where it runs, kept live by
 * /team/stream, and a message box on each.
 */
import { Hono } from 'hono';
import type { JSX } from 'hono/jsx/jsx-runtime';
import { z } from 'zod';
import type { WebDeps, WebEnv } from '../context.ts';
import { isHtmx, userName } from '../context.ts';
import { ErrorNote, Layout, PresenceBadge } from '../layout.tsx';
import { fragmentStream, toHtml } from '../live.ts';
import { buildTeamRoster, currentConversation, type Teammate } from '../roster.ts';
import { inWords, messageMember, messageTeammate } from '../actions.ts';
import { MESSAGE_LIMIT, messageField } from '../../conversations/limits.ts';

/** What the demo agent understands, for someone who has never talked to it. */
const DEMO_HINT = 'Say hello, or try: run: uname -a · remember: something · recall';

const messageForm = z.object({ prompt: z.string().trim().pipe(messageField) });

function PreviewLine(p: { mate: Teammate }) {
  const v = p.mate.preview;
  const c = p.mate.conversation;
  if (!v || !c) return null;
  const name = p.mate.agent.name;
  switch (v.kind) {
    case 'typing':
      return (
        <p class="preview muted" data-preview="typing">
          {name} is writing…
        </p>
      );
    case 'asking':
      return (
        <p class="preview notice" data-preview="asking">
          {name} asks permission: {v.text}. <a href={`/conversations/${c.id}`}>Answer in the conversation</a>
        </p>
      );
    case 'them':
      return (
        <p class="preview" data-preview="them">
          <span class="muted">{name}:</span> {v.text}
        </p>
      );
    case 'you':
      return (
        <p class="preview" data-preview="you">
          <span class="muted">You:</span> {v.text}
        </p>
      );
  }
}

export function MateStatus(p: { mate: Teammate }) {
  const m = p.mate;
  const c = m.conversation;
  return (
    <div class="mate-status" id={`mate-status-${m.agent.id}`} data-presence={m.presence.state}>
      <PresenceBadge state={m.presence.state} label={m.presence.label} />
      {m.where ? <p class="small muted where">{m.where}</p> : null}
      <PreviewLine mate={m} />
      {c ? (
        <p class="small">
          <span class="doing">
            {c.status === 'running' ? 'Working on a turn' : c.turn_count === 1 ? '1 turn' : `${c.turn_count} turns`}
          </span>{' '}
          · <a href={`/conversations/${c.id}`}>open conversation</a>
        </p>
      ) : (
        <p class="small muted">No conversation yet: a message starts one.</p>
      )}
    </div>
  );
}

function MateCard(p: { mate: Teammate; member: boolean }) {
  const id = p.mate.agent.id;
  return (
    <section
      class="card mate"
      aria-labelledby={`mate-name-${id}`}
      data-agent-id={id}
      data-team={p.member ? 'member' : 'other'}
    >
      <h3 id={`mate-name-${id}`}>{p.mate.agent.name}</h3>
      <p class="small muted">
        {p.mate.agent.runtime} · {p.mate.agent.model}
      </p>
      <div sse-swap={`mate-${id}`}>
        <MateStatus mate={p.mate} />
      </div>
      <form
        method="post"
        action={`/team/${id}/messages`}
        hx-post={`/team/${id}/messages`}
        hx-target={`#msg-result-${id}`}
        hx-swap="innerHTML"
        hx-on--after-request="if(event.detail.successful && !this.querySelector('.error')) this.reset()"
      >
        <label for={`msg-${id}`}>Message {p.mate.agent.name}</label>
        <textarea
          id={`msg-${id}`}
          name="prompt"
          rows={2}
          required
          maxlength={MESSAGE_LIMIT}
          placeholder={p.mate.agent.runtime === 'demo' ? DEMO_HINT : undefined}
          data-enter-sends=""
        ></textarea>
        <div class="row" style="margin-top:6px">
          <button type="submit">Send</button>
          <div id={`msg-result-${id}`} aria-live="polite"></div>
        </div>
      </form>
      {p.member ? null : (
        <form method="post" action={`/team/${id}/join`} class="inline">
          <button type="submit" class="secondary" aria-label={`Add ${p.mate.agent.name} to the team`}>
            Add to team
          </button>
        </form>
      )}
    </section>
  );
}

export function teamRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  app.get('/', async (c) => {
    const user = c.get('user');
    const { members, others } = await buildTeamRoster(deps.db, deps.engine, deps.team, user.account.id);
    return c.html(
      <Layout title="Team" section="team" user={userName(user)} live>
        <h1>Team</h1>
        {members.length + others.length === 0 ? (
          <p class="card">
            No agents yet. <a href="/agents/new">Create an agent</a>, then add it to the team.
          </p>
        ) : (
          <div hx-ext="sse" sse-connect="/team/stream">
            <section aria-labelledby="team-members">
              <h2 id="team-members">Members</h2>
              {members.length === 0 ? (
                <p class="muted" id="no-members">
                  No one is on the team yet. <strong>Add to team</strong> below gives an agent its team conversation:
                  its teammates can message it, and it can message them.
                </p>
              ) : (
                <div class="grid" id="members">
                  {members.map((m) => (
                    <MateCard mate={m} member />
                  ))}
                </div>
              )}
            </section>
            {others.length > 0 ? (
              <section aria-labelledby="team-others">
                <h2 id="team-others">Other agents</h2>
                <p class="muted small">Not on the team: a message here starts or continues an ordinary conversation.</p>
                <div class="grid" id="others">
                  {others.map((m) => (
                    <MateCard mate={m} member={false} />
                  ))}
                </div>
              </section>
            ) : null}
          </div>
        )}
      </Layout>,
    );
  });

  app.post('/team/:agentId/join', async (c) => {
    const user = c.get('user');
    const agentId = c.req.param('agentId');
    const added =
      deps.team && z.string().uuid().safeParse(agentId).success
        ? await deps.team.add(user.account.id, agentId, undefined)
        : null;
    if (added?.ok) return c.redirect('/', 303);
    const message = added ? inWords(added.error).message : 'The team is not available on this server.';
    return c.html(
      <Layout title="Team" section="team" user={userName(user)}>
        <h1>Team</h1>
        <ErrorNote message={message} />
        <a href="/">Back to the Team page</a>
      </Layout>,
      added ? (inWords(added.error).status as 400) : 404,
    );
  });

  app.get('/team/stream', (c) => {
    const accountId = c.get('user').account.id;
    let convIds: string[] = [];
    return fragmentStream(c, {
      refreshMs: deps.refreshMs ?? 2000,
      onError: (e) => deps.logger.warn({ err: e }, 'team stream failed'),
      render: async () => {
        const { members, others } = await buildTeamRoster(deps.db, deps.engine, deps.team, accountId);
        const roster = [...members, ...others];
        convIds = roster.flatMap((m) => (m.conversation ? [m.conversation.id] : []));
        const out = new Map<string, string>();
        for (const m of roster) out.set(`mate-${m.agent.id}`, await toHtml(<MateStatus mate={m} />));
        return out;
      },
      watch: (changed) => {
        const offs = [
          deps.watchRunners(accountId, changed),
          ...convIds.map((id) => deps.engine.events.subscribe(id, changed)),
        ];
        return () => offs.forEach((off) => off());
      },
    });
  });

  app.post('/team/:agentId/messages', async (c) => {
    const user = c.get('user');
    const agentId = c.req.param('agentId');
    const form = messageForm.safeParse(await c.req.parseBody());
    const reply = async (status: number, body: JSX.Element) =>
      isHtmx(c)
        ? c.html(body, 200)
        : c.html(
            <Layout title="Message" section="team" user={userName(user)}>
              {body}
            </Layout>,
            status as 400,
          );
    if (!form.success)
      return reply(400, <ErrorNote message={form.error.issues[0]?.message ?? 'The message is invalid.'} />);
    // A member's message goes to its team conversation, as POST /api/team/:agent_id/messages sends it.
    const member =
      deps.team && z.string().uuid().safeParse(agentId).success
        ? await deps.team.get(user.account.id, agentId)
        : undefined;
    const sent =
      member && deps.team
        ? await messageMember(deps.team, user.account.id, agentId, form.data.prompt)
        : await messageTeammate(deps, user.account.id, agentId, form.data.prompt);
    if (!sent.ok) return reply(sent.status, <ErrorNote message={sent.message} />);
    if (!isHtmx(c)) return c.redirect(`/conversations/${sent.conversationId}`, 303);
    return c.html(
      <span class="small">
        Sent. <a href={`/conversations/${sent.conversationId}`}>Follow the conversation</a>
      </span>,
    );
  });

  return app;
}

export { currentConversation };
