/**
 * Account → API keys: create (the plaintext is shown once, on the response page), list, revoke. Your keys
 * are listed apart from the tokens Fountain gives running agents and the keys runners use.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Db } from '../../store/db.ts';
import { createKey, listKeys, revokeKey } from '../../account/service.ts';
import type { ApiKey } from '../../store/schema.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';

const nameForm = z.object({
  name: z
    .string()
    .trim()
    .min(1, 'Give the key a name, so you can tell it apart later.')
    .max(200, 'At most 200 characters.'),
});

type KeyKind = 'user' | 'runner' | 'agent';
const kindOf = (k: ApiKey): KeyKind =>
  k.conversationId || k.scopes.includes('sprite')
    ? 'agent'
    : k.scopes.length === 1 && k.scopes[0] === 'runner'
      ? 'runner'
      : 'user';

/** Keys as a list of cards: one per key, so nothing sits off-screen on a phone. */
function KeyList(p: { keys: readonly ApiKey[]; currentKeyId: string; empty: string; agents?: boolean }) {
  if (p.keys.length === 0) return <p class="muted">{p.empty}</p>;
  return (
    <ul class="cards">
      {p.keys.map((k) => (
        <li class="card item">
          <div class="item-main">
            <strong>
              {p.agents && k.conversationId ? (
                <a href={`/conversations/${k.conversationId}`}>Agent in a conversation</a>
              ) : (
                k.name
              )}
            </strong>
            {k.id === p.currentKeyId ? <span class="muted small"> (this session)</span> : null}
            <div class="small muted">
              <code>{k.prefix}…</code> · created {when(k.createdAt)} · last used {when(k.lastUsedAt)}
            </div>
          </div>
          <form
            method="post"
            action={`/account/api-keys/${k.id}/revoke`}
            class="inline"
            onsubmit={`return confirm(${JSON.stringify(`Revoke the key ${k.name}? Anything using it is refused from now on.`)})`}
          >
            <button type="submit" class="danger" aria-label={`Revoke key ${k.name}`}>
              Revoke
            </button>
          </form>
        </li>
      ))}
    </ul>
  );
}

function KeysPage(p: {
  user: { name: string };
  keys: readonly ApiKey[];
  currentKeyId: string;
  created?: { name: string; key: string };
  error?: string;
  notice?: string;
}) {
  return (
    <Layout title="API keys" section="keys" user={p.user}>
      <h1>API keys</h1>
      {p.created ? (
        <div class="card" role="status">
          <p>
            <strong>New key “{p.created.name}”.</strong> Copy it now: it is not shown again.
          </p>
          <pre class="key" id="new-key">
            {p.created.key}
          </pre>
        </div>
      ) : null}
      {p.notice ? <p role="status">{p.notice}</p> : null}
      <form method="post" action="/account/api-keys" class="card">
        <label for="key-name">Name for a new key</label>
        <input
          id="key-name"
          name="name"
          type="text"
          required
          maxlength={200}
          aria-describedby={p.error ? 'key-name-error' : undefined}
          aria-invalid={p.error ? 'true' : undefined}
        />
        <ErrorNote id="key-name-error" message={p.error} />
        <p>
          <button type="submit">Create key</button>
        </p>
      </form>
      <h2>Your keys</h2>
      <KeyList
        keys={p.keys.filter((k) => kindOf(k) === 'user')}
        currentKeyId={p.currentKeyId}
        empty="No keys of your own yet."
      />
      <h2>Runner keys</h2>
      <p class="small muted">Each runner added on the Runners page gets a key that can only connect that runner.</p>
      <KeyList
        keys={p.keys.filter((k) => kindOf(k) === 'runner')}
        currentKeyId={p.currentKeyId}
        empty="No runner keys."
      />
      <h2>Used by running agents</h2>
      <p class="small muted">
        Fountain gives each running agent a token for its own conversation; it is revoked with the conversation.
      </p>
      <KeyList
        keys={p.keys.filter((k) => kindOf(k) === 'agent')}
        currentKeyId={p.currentKeyId}
        empty="No agent is running."
        agents
      />
    </Layout>
  );
}

export function keyRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const db = deps.db as unknown as Db;

  app.get('/account/api-keys', async (c) => {
    const user = c.get('user');
    return c.html(
      <KeysPage user={userName(user)} keys={await listKeys(db, user.account.id)} currentKeyId={user.key.id} />,
    );
  });

  app.post('/account/api-keys', async (c) => {
    const user = c.get('user');
    const form = nameForm.safeParse(await c.req.parseBody());
    if (!form.success) {
      return c.html(
        <KeysPage
          user={userName(user)}
          keys={await listKeys(db, user.account.id)}
          currentKeyId={user.key.id}
          error={form.error.issues[0]?.message}
        />,
        422,
      );
    }
    const created = await createKey(db, { accountId: user.account.id, name: form.data.name, scopes: ['full'] });
    return c.html(
      <KeysPage
        user={userName(user)}
        keys={await listKeys(db, user.account.id)}
        currentKeyId={user.key.id}
        created={{ name: form.data.name, key: created.key }}
      />,
      201,
    );
  });

  app.post('/account/api-keys/:id/revoke', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const done = z.string().uuid().safeParse(id).success && (await revokeKey(db, user.account.id, id));
    // Revoking the key this session rests on ends the session: the next request signs out.
    if (done && id === user.key.id) return c.redirect('/signin', 303);
    const keys = await listKeys(db, user.account.id);
    return done
      ? c.html(<KeysPage user={userName(user)} keys={keys} currentKeyId={user.key.id} notice="Key revoked." />)
      : c.html(
          <KeysPage
            user={userName(user)}
            keys={keys}
            currentKeyId={user.key.id}
            error="That key does not exist or was already revoked."
          />,
          404,
        );
  });

  return app;
}
