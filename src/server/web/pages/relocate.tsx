/**
 * Fork and move on the Conversation page: "Fork from here" under each completed turn and the "Move to…"
 * runner select, each a plain form posted and redirected (the fork opens the new conversation).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { ConversationView } from '../../conversations/views.ts';
import { listRunners } from '../../runners/service.ts';
import type { Db } from '../../store/db.ts';
import { inWords } from '../actions.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout } from '../layout.tsx';

const forkForm = z.object({ turn_id: z.string().uuid('Pick a turn to fork from.') });
const moveForm = z.object({ runner: z.string().trim().min(1, 'Pick a runner to move to.').max(200) });

/** Under a completed turn: a new conversation from the checkpoint taken after it. */
export function ForkButton(p: { conversationId: string; turnId: string }) {
  return (
    <form method="post" action={`/conversations/${p.conversationId}/fork`} class="inline fork" data-fork={p.turnId}>
      <input type="hidden" name="turn_id" value={p.turnId} />
      <button type="submit" class="secondary small-button" title="A new conversation that goes on from this point">
        Fork from here
      </button>
    </form>
  );
}

/** The runners a conversation can move to, for the select (the one it is on, and offline ones, shown disabled). */
export async function moveTargets(
  deps: WebDeps,
  accountId: string,
): Promise<Array<{ id: string; name: string; online: boolean }>> {
  const online = new Set((deps.runnerHost?.online(accountId) ?? []).map((i) => i.runnerId));
  const rows = await listRunners(deps.db as unknown as Db, accountId);
  return rows.map((r) => ({ id: r.id, name: r.name, online: online.has(r.id) }));
}

export function MoveControl(p: {
  conv: ConversationView;
  runners: ReadonlyArray<{ id: string; name: string; online: boolean }>;
}) {
  if (p.conv.status === 'terminated' || p.conv.status === 'failed' || p.runners.length === 0) return null;
  const here = p.conv.sandbox?.runner?.id;
  return (
    <form method="post" action={`/conversations/${p.conv.id}/move`} class="row small move" id="move">
      <label for="move-runner">Move to…</label>
      <select id="move-runner" name="runner" required>
        <option value="">a runner</option>
        {p.runners.map((r) => (
          <option value={r.id} disabled={!r.online || r.id === here}>
            {r.name}
            {r.id === here ? ' (here)' : r.online ? '' : ' (offline)'}
          </option>
        ))}
      </select>
      <button type="submit" class="secondary small-button">
        Move
      </button>
    </form>
  );
}

export function relocateRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  const refused = (c: import('hono').Context<WebEnv>, id: string, status: number, message: string) =>
    c.html(
      <Layout title="Could not do that" section="conversation" user={userName(c.get('user'))}>
        <ErrorNote message={message} />
        <a href={`/conversations/${id}`}>Back to the conversation</a>
      </Layout>,
      status as 400,
    );

  app.post('/conversations/:id/fork', async (c) => {
    const id = c.req.param('id');
    const form = forkForm.safeParse(await c.req.parseBody());
    if (!form.success) return refused(c, id, 400, form.error.issues[0]?.message ?? 'Pick a turn to fork from.');
    const r = await deps.engine.fork(c.get('user').account.id, id, { turnId: form.data.turn_id });
    if (!r.ok) {
      const e = inWords(r.error);
      return refused(c, id, e.status, e.message);
    }
    return c.redirect(`/conversations/${r.value.id}`, 303);
  });

  app.post('/conversations/:id/move', async (c) => {
    const id = c.req.param('id');
    const form = moveForm.safeParse(await c.req.parseBody());
    if (!form.success) return refused(c, id, 400, form.error.issues[0]?.message ?? 'Pick a runner to move to.');
    const r = await deps.engine.move(c.get('user').account.id, id, { runner: form.data.runner });
    if (!r.ok) {
      // The target runner's own words: inWords's runner_offline speaks of the conversation's runner.
      const e = r.error.code === 'runner_offline' ? { status: 409, message: r.error.message } : inWords(r.error);
      return refused(c, id, e.status, e.message);
    }
    return c.redirect(`/conversations/${id}`, 303);
  });

  return app;
}
