/**
 * Account → Model credentials: set (value in a password field, never shown again), list which are set
 * with their base URL, remove. The value goes straight into the credential service.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { Private } from '../../../sandbox/private.ts';
import {
  CREDENTIAL_API,
  CREDENTIAL_PROVIDERS,
  SET_NAME,
  SET_NAME_RULE,
  type CredentialProvider,
} from '../../credentials/providers.ts';
import { baseUrlSchema } from '../../credentials/routes.ts';
import type { CredentialService, CredentialView } from '../../credentials/service.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';

const setForm = z.object({
  provider: z.enum(CREDENTIAL_PROVIDERS, { error: 'Pick which credential this is.' }),
  value: z
    .string()
    .trim()
    .min(1, 'Paste the key or token.')
    .max(8192, 'At most 8192 characters.')
    .refine((s) => !/\s/.test(s), 'A key has no spaces or line breaks in it.'),
  base_url: z.union([z.literal(''), baseUrlSchema]).optional(),
  name: z.union([z.literal(''), z.string().trim().regex(SET_NAME, `Set name: ${SET_NAME_RULE}.`)]).optional(),
  validate: z.string().optional(),
});

const RUNTIME_USE: Readonly<Record<CredentialProvider, string>> = {
  anthropic_api_key: 'Claude Code; opencode with anthropic/… models',
  claude_code_oauth_token: 'Claude Code (preferred over the API key when both are set)',
  openai_api_key: 'Codex; opencode with openai/… models',
  gemini_api_key: 'Gemini CLI; opencode with google/… models',
};

function CredentialsPage(p: {
  user: { name: string };
  rows: readonly CredentialView[];
  error?: string;
  notice?: string;
}) {
  // One line per stored credential of each set; a provider with none shows one "not set" line.
  type Line = { provider: CredentialProvider; row: CredentialView | undefined };
  const lines: Line[] = CREDENTIAL_PROVIDERS.flatMap((provider): Line[] => {
    const rows = p.rows.filter((r) => r.provider === provider);
    return rows.length > 0 ? rows.map((row) => ({ provider, row })) : [{ provider, row: undefined }];
  });
  return (
    <Layout title="Model credentials" section="credentials" user={p.user}>
      <h1>Model credentials</h1>
      <p>
        The keys your agents use to reach their model. They are stored encrypted, handed only to the agent process that
        needs them, and never shown again. See <a href="/docs/connect-your-model">Connect your model</a>.
      </p>
      {p.notice ? <p role="status">{p.notice}</p> : null}
      <div class="table">
        <table class="stack">
          <thead>
            <tr>
              <th scope="col">Credential</th>
              <th scope="col">Credential set</th>
              <th scope="col">Used by</th>
              <th scope="col">Base URL</th>
              <th scope="col">Set</th>
              <th scope="col">
                <span class="muted">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {lines.map(({ provider, row }) => {
              const label = row && row.name !== 'default' ? `${provider} (${row.name})` : provider;
              return (
                <tr>
                  <td>
                    <code>{provider}</code>
                    <div class="muted small">{CREDENTIAL_API[provider].label}</div>
                  </td>
                  <td data-label="Credential set">{row ? <code>{row.name}</code> : <span class="muted">—</span>}</td>
                  <td data-label="Used by">{RUNTIME_USE[provider]}</td>
                  <td data-label="Base URL">
                    {row?.base_url ? (
                      <code>{row.base_url}</code>
                    ) : (
                      <span class="muted">{row ? 'vendor API' : '—'}</span>
                    )}
                  </td>
                  <td data-label="Set">{row ? when(new Date(row.updated_at)) : <span class="muted">not set</span>}</td>
                  <td>
                    {row ? (
                      <form
                        method="post"
                        action={`/account/credentials/${provider}/remove`}
                        class="inline"
                        onsubmit={`return confirm(${JSON.stringify(`Remove the ${label} credential?`)})`}
                      >
                        <input type="hidden" name="name" value={row.name} />
                        <button type="submit" class="danger" aria-label={`Remove ${label}`}>
                          Remove
                        </button>
                      </form>
                    ) : null}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <form method="post" action="/account/credentials" class="card" autocomplete="off">
        <h2>Set a credential</h2>
        <label for="cred-provider">Credential</label>
        <select id="cred-provider" name="provider">
          {CREDENTIAL_PROVIDERS.map((provider) => (
            <option value={provider}>{`${provider} — ${CREDENTIAL_API[provider].label}`}</option>
          ))}
        </select>
        <label for="cred-value">Key or token</label>
        <input
          id="cred-value"
          name="value"
          type="password"
          required
          maxlength={8192}
          autocomplete="off"
          aria-describedby={p.error ? 'cred-error' : undefined}
          aria-invalid={p.error ? 'true' : undefined}
        />
        <label for="cred-name">Set name (optional: such as work or personal; agents pick a set by it)</label>
        <input id="cred-name" name="name" type="text" placeholder="default" maxlength={40} />
        <label for="cred-base-url">Base URL (optional: a gateway instead of the vendor API)</label>
        <input id="cred-base-url" name="base_url" type="url" placeholder="https://gateway.example.com" />
        <label>
          <input type="checkbox" name="validate" value="on" checked /> Check it against the provider before saving
        </label>
        <ErrorNote id="cred-error" message={p.error} />
        <p>
          <button type="submit">Save credential</button>
        </p>
      </form>
    </Layout>
  );
}

export function credentialPages(deps: WebDeps & { credentials: CredentialService }): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const { credentials } = deps;

  // After a save or a removal the browser is sent here (POST-redirect-GET: a reload repeats nothing); the
  // query names what was done, checked against the known names.
  const done = z.object({
    saved: z.enum(CREDENTIAL_PROVIDERS).optional().catch(undefined),
    removed: z.enum(CREDENTIAL_PROVIDERS).optional().catch(undefined),
  });
  app.get('/account/credentials', async (c) => {
    const user = c.get('user');
    const q = done.parse(c.req.query());
    const notice = q.saved ? `${q.saved} saved.` : q.removed ? `${q.removed} removed.` : undefined;
    return c.html(
      <CredentialsPage user={userName(user)} rows={await credentials.list(user.account.id)} notice={notice} />,
    );
  });

  app.post('/account/credentials', async (c) => {
    const user = c.get('user');
    const form = setForm.safeParse(await c.req.parseBody());
    if (!form.success) {
      return c.html(
        <CredentialsPage
          user={userName(user)}
          rows={await credentials.list(user.account.id)}
          error={form.error.issues[0]?.message}
        />,
        422,
      );
    }
    const { provider, value, base_url, validate, name } = form.data;
    const r = await credentials.set(user.account.id, provider, new Private(value), {
      baseUrl: base_url ? base_url : null,
      validate: validate === 'on',
      name: name || 'default',
    });
    if (!r.ok)
      return c.html(
        <CredentialsPage
          user={userName(user)}
          rows={await credentials.list(user.account.id)}
          error={`Not saved: ${r.failure.message}.`}
        />,
        422,
      );
    return c.redirect(`/account/credentials?saved=${provider}`, 303);
  });

  app.post('/account/credentials/:provider/remove', async (c) => {
    const user = c.get('user');
    const provider = z.enum(CREDENTIAL_PROVIDERS).safeParse(c.req.param('provider'));
    const body = await c.req.parseBody();
    const name = z.string().regex(SET_NAME).catch('default').parse(body.name);
    const removed = provider.success ? await credentials.remove(user.account.id, provider.data, name) : 'absent';
    if (removed === 'removed') return c.redirect(`/account/credentials?removed=${provider.data}`, 303);
    const rows = await credentials.list(user.account.id);
    if (removed === 'absent')
      return c.html(<CredentialsPage user={userName(user)} rows={rows} error="That credential is not set." />, 404);
    const names = removed.agents.map((a) => a.name).join(', ');
    return c.html(
      <CredentialsPage
        user={userName(user)}
        rows={rows}
        error={`Not removed: the agent${removed.agents.length === 1 ? '' : 's'} ${names} use${removed.agents.length === 1 ? 's' : ''} this credential set. Switch them to another set first.`}
      />,
      409,
    );
  });

  return app;
}
