/**
 * Account → Webhooks: the endpoints with their state, adding one (its signing secret shown once),
 * enabling, disabling and removing; one endpoint's deliveries with every attempt, and redelivery.
 */
import { isUuid } from '../../http/ids.ts';
import { Hono } from 'hono';
import { z } from 'zod';
import { WEBHOOK_EVENT_KINDS, type WebhookEventKind } from '../../webhooks/kinds.ts';
import { webhookUrlSchema } from '../../webhooks/routes.ts';
import type { DeliveryView, WebhookService, WebhookView } from '../../webhooks/service.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';

const KIND_WORDS: Readonly<Record<WebhookEventKind, string>> = {
  'conversation.created': 'a conversation was created',
  'turn.ended': 'a turn ended',
  'permission.requested': 'an agent asks for permission',
  'conversation.failed': "a conversation's computer could not be set up",
  'runner.offline': 'a runner went offline',
};

const addForm = z.object({
  url: webhookUrlSchema,
  events: z
    .union([z.enum(WEBHOOK_EVENT_KINDS), z.array(z.enum(WEBHOOK_EVENT_KINDS))], {
      error: 'Tick at least one event.',
    })
    .transform((v) => (Array.isArray(v) ? v : [v])),
});

const stateOf = (w: WebhookView): string =>
  w.enabled
    ? w.failing_since
      ? `failing since ${when(w.failing_since)}`
      : 'on'
    : `off${w.disabled_reason ? `: ${w.disabled_reason}` : ''}`;

function WebhooksPage(p: {
  user: { name: string };
  rows: readonly WebhookView[];
  error?: string | undefined;
  notice?: string | undefined;
  secret?: string | undefined;
}) {
  return (
    <Layout title="Webhooks" section="webhooks" user={p.user}>
      <h1>Webhooks</h1>
      <p>
        Fountain calls your service when something happens, with a signed message that names what happened (never its
        contents). See <a href="/docs/webhooks">Webhooks</a> for how to check the signature.
      </p>
      {p.notice ? <p role="status">{p.notice}</p> : null}
      {p.secret ? (
        <div class="card" role="status">
          <p>
            The signing secret, shown only this once. Keep it with your receiver:
            <br />
            <code class="secret">{p.secret}</code>
          </p>
        </div>
      ) : null}
      {p.rows.length ? (
        <div class="table">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">When</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="muted">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {p.rows.map((w) => (
                <tr>
                  <td data-label="Address">
                    <a href={`/account/webhooks/${w.id}`}>{w.url}</a>
                  </td>
                  <td data-label="When">{w.events.map((k) => KIND_WORDS[k]).join('; ')}</td>
                  <td data-label="State">{stateOf(w)}</td>
                  <td>
                    <form
                      method="post"
                      action={`/account/webhooks/${w.id}/${w.enabled ? 'disable' : 'enable'}`}
                      class="inline"
                    >
                      <button type="submit">{w.enabled ? 'Turn off' : 'Turn on'}</button>
                    </form>{' '}
                    <form
                      method="post"
                      action={`/account/webhooks/${w.id}/remove`}
                      class="inline"
                      onsubmit={`return confirm(${JSON.stringify(`Remove the webhook to ${w.url} and its delivery history?`)})`}
                    >
                      <button type="submit" class="danger" aria-label={`Remove the webhook to ${w.url}`}>
                        Remove
                      </button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <p class="muted">No webhooks yet.</p>
      )}
      <form method="post" action="/account/webhooks" class="card" autocomplete="off">
        <h2>Add a webhook</h2>
        <label for="hook-url">Address your service listens at</label>
        <input
          id="hook-url"
          name="url"
          type="url"
          required
          placeholder="https://hooks.example.com/fountain"
          aria-describedby={p.error ? 'hook-error' : undefined}
          aria-invalid={p.error ? 'true' : undefined}
        />
        <fieldset>
          <legend>Call it when</legend>
          {WEBHOOK_EVENT_KINDS.map((k) => (
            <label>
              <input type="checkbox" name="events" value={k} checked={k === 'turn.ended'} /> {KIND_WORDS[k]}
            </label>
          ))}
        </fieldset>
        <ErrorNote id="hook-error" message={p.error} />
        <p>
          <button type="submit">Add webhook</button>
        </p>
      </form>
    </Layout>
  );
}

function DeliveriesPage(p: {
  user: { name: string };
  hook: WebhookView;
  rows: readonly DeliveryView[];
  notice?: string;
}) {
  return (
    <Layout title="Webhook deliveries" section="webhooks" user={p.user}>
      <p>
        <a href="/account/webhooks">← Webhooks</a>
      </p>
      <h1>Deliveries to {p.hook.url}</h1>
      <p>State: {stateOf(p.hook)}</p>
      {p.notice ? <p role="status">{p.notice}</p> : null}
      {p.rows.length ? (
        <div class="table">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">What happened</th>
                <th scope="col">Delivery</th>
                <th scope="col">Attempts</th>
                <th scope="col">
                  <span class="muted">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {p.rows.map((d) => (
                <tr>
                  <td data-label="What happened">
                    {KIND_WORDS[d.event]}
                    <div class="muted small">{when(d.created_at)}</div>
                  </td>
                  <td data-label="Delivery">
                    {d.status === 'pending' ? `waiting, next try ${when(d.next_attempt_at)}` : d.status}
                  </td>
                  <td data-label="Attempts">
                    <ol class="small">
                      {d.attempt_log.map((a) => (
                        <li>
                          {a.status_code !== null ? `answered ${a.status_code}` : (a.error ?? 'no answer')} in{' '}
                          {a.latency_ms} ms
                          {a.response_excerpt ? <div class="muted">{a.response_excerpt.slice(0, 120)}</div> : null}
                        </li>
                      ))}
                    </ol>
                  </td>
                  <td>
                    <form
                      method="post"
                      action={`/account/webhooks/${p.hook.id}/deliveries/${d.id}/redeliver`}
                      class="inline"
                    >
                      <button type="submit">Send again</button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <p class="muted">Nothing delivered yet.</p>
      )}
    </Layout>
  );
}

export function webhookPages(deps: WebDeps & { webhooks: WebhookService }): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const { webhooks } = deps;
  const list = async (accountId: string) => webhooks.list(accountId);

  app.get('/account/webhooks', async (c) => {
    const user = c.get('user');
    return c.html(<WebhooksPage user={userName(user)} rows={await list(user.account.id)} />);
  });

  app.post('/account/webhooks', async (c) => {
    const user = c.get('user');
    const form = addForm.safeParse(await c.req.parseBody({ all: true }));
    if (!form.success) {
      return c.html(
        <WebhooksPage user={userName(user)} rows={await list(user.account.id)} error={form.error.issues[0]?.message} />,
        422,
      );
    }
    const r = await webhooks.create(user.account.id, form.data);
    // Rendered, not redirected: the secret exists in this answer only.
    return c.html(
      <WebhooksPage
        user={userName(user)}
        rows={await list(user.account.id)}
        notice={`Added the webhook to ${r.webhook.url}.`}
        secret={r.secret}
      />,
      201,
    );
  });

  for (const [action, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    app.post(`/account/webhooks/:id/${action}`, async (c) => {
      const user = c.get('user');
      const id = c.req.param('id');
      if (isUuid(id)) await webhooks.update(user.account.id, id, { enabled });
      return c.redirect('/account/webhooks', 303);
    });
  }

  app.post('/account/webhooks/:id/remove', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    if (isUuid(id)) await webhooks.remove(user.account.id, id);
    return c.redirect('/account/webhooks', 303);
  });

  app.get('/account/webhooks/:id', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const hook = isUuid(id) ? await webhooks.get(user.account.id, id) : null;
    const rows = hook?.ok ? await webhooks.deliveries(user.account.id, id, 100) : null;
    if (!hook?.ok || !rows?.ok) return c.notFound();
    return c.html(<DeliveriesPage user={userName(user)} hook={hook.value} rows={rows.value} />);
  });

  app.post('/account/webhooks/:id/deliveries/:delivery/redeliver', async (c) => {
    const user = c.get('user');
    const { id, delivery } = c.req.param();
    if (isUuid(id) && isUuid(delivery)) await webhooks.redeliver(user.account.id, id, delivery);
    return c.redirect(`/account/webhooks/${isUuid(id) ? id : ''}`, 303);
  });

  return app;
}
