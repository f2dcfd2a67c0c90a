/**
 * Environments: the list and the create/edit form (variables, write-only secrets, packages,
 * repositories, setup script, network). Fields are validated by the API's own schemas; a secret's
 * value is never shown again once saved, only its name.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import { z } from 'zod';
import { EnvironmentCreateBody } from '../../environments/schemas.ts';
import { fieldsFromCreate } from '../../environments/service.ts';
import type { EnvironmentFields } from '../../environments/store.ts';
import type { Environment } from '../../store/environment-schema.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Field, Layout } from '../layout.tsx';

interface FormValues {
  name: string;
  env_vars: string;
  secrets: string;
  apt: string;
  npm: string;
  repositories: string;
  setup_script: string;
  networking_type: string;
  allowed_hosts: string;
}

type Errors = Record<string, string>;

const fromEnvironment = (e: Environment | undefined): FormValues => ({
  name: e?.name ?? '',
  env_vars: Object.entries(e?.envVars ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join('\n'),
  secrets: '',
  apt: (e?.packages.apt ?? []).join(' '),
  npm: (e?.packages.npm ?? []).join(' '),
  repositories: (e?.repositories ?? [])
    .map((r) =>
      [r.url, r.mount_path, r.ref ? `ref=${r.ref}` : '', r.secret_key ? `secret=${r.secret_key}` : '']
        .filter(Boolean)
        .join(' '),
    )
    .join('\n'),
  setup_script: e?.setupScript ?? '',
  networking_type: e?.networkingType ?? 'unrestricted',
  allowed_hosts: (e?.allowedHosts ?? []).join(' '),
});

/** `NAME=value` lines; a line without `=` is reported by the schema as a bad name. */
const pairs = (text: string): Record<string, string> =>
  Object.fromEntries(
    text
      .split(/\r?\n/)
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const i = l.indexOf('=');
        return i < 0 ? [l.trim(), ''] : [l.slice(0, i).trim(), l.slice(i + 1)];
      }),
  );
const words = (text: string): string[] => text.split(/\s+/).filter(Boolean);

/** One repository per line: `url [mount_path] [ref=REF] [secret=KEY]`. */
const repositories = (text: string) =>
  text
    .split(/\r?\n/)
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [url = '', ...rest] = words(l);
      const r: Record<string, string> = { url };
      for (const w of rest) {
        if (w.startsWith('ref=')) r.ref = w.slice(4);
        else if (w.startsWith('secret=')) r.secret_key = w.slice(7);
        else r.mount_path = w;
      }
      return r;
    });

export function parseEnvironmentForm(
  body: Record<string, unknown>,
):
  | { ok: true; fields: EnvironmentFields; secrets: Record<string, string> }
  | { ok: false; errors: Errors; values: FormValues } {
  const str = (k: keyof FormValues) => (typeof body[k] === 'string' ? (body[k] as string) : '');
  const values: FormValues = {
    name: str('name').trim(),
    env_vars: str('env_vars'),
    secrets: str('secrets'),
    apt: str('apt'),
    npm: str('npm'),
    repositories: str('repositories'),
    setup_script: str('setup_script'),
    networking_type: str('networking_type') || 'unrestricted',
    allowed_hosts: str('allowed_hosts'),
  };
  const parsed = EnvironmentCreateBody.safeParse({
    name: values.name,
    env_vars: pairs(values.env_vars),
    secrets: pairs(values.secrets),
    packages: { apt: words(values.apt), npm: words(values.npm) },
    repositories: repositories(values.repositories),
    setup_script: values.setup_script.replace(/\r\n/g, '\n'),
    networking_type: values.networking_type,
    networking_config: { allowed_hosts: words(values.allowed_hosts) },
  });
  if (!parsed.success) {
    const errors: Errors = {};
    for (const issue of parsed.error.issues) {
      const field =
        issue.path[0] === 'packages'
          ? String(issue.path[1])
          : issue.path[0] === 'networking_config'
            ? 'allowed_hosts'
            : String(issue.path[0] ?? 'form');
      errors[field] ??= issue.message;
    }
    // A secret's value is never sent back to the browser, even on a refused form.
    return { ok: false, errors, values: { ...values, secrets: '' } };
  }
  return { ok: true, fields: fieldsFromCreate(parsed.data), secrets: parsed.data.secrets };
}

function EnvironmentForm(p: {
  action: string;
  values: FormValues;
  errors: Errors;
  secretNames: readonly string[];
  submit: string;
}) {
  const v = p.values;
  const e = p.errors;
  return (
    <form method="post" action={p.action} class="card" novalidate>
      <ErrorNote message={e.form} />
      <Field id="name" label="Name" error={e.name}>
        <input id="name" name="name" type="text" value={v.name} required maxlength={200} />
      </Field>
      <Field
        id="env_vars"
        label="Variables"
        error={e.env_vars}
        hint="One NAME=value per line. Written to the sandbox's .env and the agent's environment."
      >
        <textarea id="env_vars" name="env_vars" rows={4}>
          {v.env_vars}
        </textarea>
      </Field>
      <Field
        id="secrets"
        label="Secrets"
        error={e.secrets}
        hint={`One NAME=value per line; set or replace. Values are sealed and never shown again: they reach only the agent's process environment.${p.secretNames.length ? ` Stored: ${p.secretNames.join(', ')}.` : ''}`}
      >
        <textarea id="secrets" name="secrets" rows={3} autocomplete="off" spellcheck={false}>
          {v.secrets}
        </textarea>
      </Field>
      <Field id="apt" label="apt packages" error={e.apt} hint="Space-separated.">
        <input id="apt" name="apt" type="text" value={v.apt} />
      </Field>
      <Field id="npm" label="npm packages" error={e.npm} hint="Space-separated, installed with npm install -g.">
        <input id="npm" name="npm" type="text" value={v.npm} />
      </Field>
      <Field
        id="repositories"
        label="Repositories"
        error={e.repositories}
        hint="One per line: https URL, then optionally a path under /home/sprite, ref=BRANCH and secret=SECRET_NAME for the clone token."
      >
        <textarea id="repositories" name="repositories" rows={3}>
          {v.repositories}
        </textarea>
      </Field>
      <Field
        id="setup_script"
        label="Setup script"
        error={e.setup_script}
        hint="Runs with sh in /home/sprite after the clone; 120 s."
      >
        <textarea id="setup_script" name="setup_script" rows={4}>
          {v.setup_script}
        </textarea>
      </Field>
      <Field
        id="networking_type"
        label="Network"
        error={e.networking_type}
        hint="limited needs a backend that enforces egress (namespace runner, E2B, Daytona, Sprites)."
      >
        <select id="networking_type" name="networking_type">
          {['unrestricted', 'limited'].map((t) => (
            <option value={t} selected={v.networking_type === t}>
              {t}
            </option>
          ))}
        </select>
      </Field>
      <Field
        id="allowed_hosts"
        label="Allowed hosts"
        error={e.allowed_hosts}
        hint="Space-separated domains or *.domain, for a limited network."
      >
        <input id="allowed_hosts" name="allowed_hosts" type="text" value={v.allowed_hosts} />
      </Field>
      <p>
        <button type="submit">{p.submit}</button>
      </p>
    </form>
  );
}

export function environmentRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const svc = deps.environments;
  const load = async (accountId: string, id: string) =>
    z.string().uuid().safeParse(id).success ? svc.get(accountId, id) : undefined;
  const notFound = (c: import('hono').Context<WebEnv>) =>
    c.html(
      <Layout title="Not found" section="environments" user={userName(c.get('user'))}>
        <h1>Environment not found</h1>
        <a href="/environments">All environments</a>
      </Layout>,
      404,
    );

  app.get('/environments', async (c) => {
    const user = c.get('user');
    const list = await svc.list(user.account.id);
    const secretCounts = await Promise.all(list.map(async (e) => (await svc.secretNames(e.id)).length));
    return c.html(
      <Layout title="Environments" section="environments" user={userName(user)}>
        <h1>Environments</h1>
        <p class="muted">
          What an agent's sandbox is provisioned with before the agent starts. Pick one on the agent's form.
        </p>
        <p>
          <a class="button" href="/environments/new">
            New environment
          </a>
        </p>
        {list.length === 0 ? (
          <p class="muted">No environments yet.</p>
        ) : (
          <div class="table">
            <table class="stack">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Network</th>
                  <th scope="col">Variables</th>
                  <th scope="col">Secrets</th>
                  <th scope="col">Repositories</th>
                  <th scope="col">
                    <span class="muted">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((e, i) => (
                  <tr>
                    <td data-label="Name">{e.name}</td>
                    <td data-label="Network">
                      {e.networkingType === 'limited'
                        ? `limited (${e.allowedHosts.join(', ') || 'nothing'})`
                        : 'unrestricted'}
                    </td>
                    <td data-label="Variables">{Object.keys(e.envVars).length}</td>
                    <td data-label="Secrets">{secretCounts[i]}</td>
                    <td data-label="Repositories">{e.repositories.length}</td>
                    <td>
                      <a href={`/environments/${e.id}/edit`} aria-label={`Edit ${e.name}`}>
                        Edit
                      </a>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Layout>,
    );
  });

  const page = (
    c: import('hono').Context<WebEnv>,
    title: string,
    action: string,
    values: FormValues,
    errors: Errors,
    secretNames: readonly string[],
    submit: string,
    status: 200 | 409 | 422 = 200,
    extra: Child = null,
  ) =>
    c.html(
      <Layout title={title} section="environments" user={userName(c.get('user'))}>
        <h1>{title}</h1>
        <EnvironmentForm action={action} values={values} errors={errors} secretNames={secretNames} submit={submit} />
        {extra}
      </Layout>,
      status,
    );

  app.get('/environments/new', (c) =>
    page(c, 'New environment', '/environments', fromEnvironment(undefined), {}, [], 'Create environment'),
  );

  app.post('/environments', async (c) => {
    const user = c.get('user');
    const parsed = parseEnvironmentForm(await c.req.parseBody());
    if (!parsed.ok)
      return page(c, 'New environment', '/environments', parsed.values, parsed.errors, [], 'Create environment', 422);
    const r = await svc.create(user.account.id, parsed.fields, parsed.secrets);
    if (!r.ok)
      return page(
        c,
        'New environment',
        '/environments',
        { ...fromEnvironment(undefined), name: parsed.fields.name },
        { name: 'You already have an environment with that name.' },
        [],
        'Create environment',
        409,
      );
    return c.redirect('/environments', 303);
  });

  const deleteForm = (e: Environment) => (
    <form
      method="post"
      action={`/environments/${e.id}/delete`}
      class="card"
      onsubmit={`return confirm(${JSON.stringify(`Delete the environment ${e.name}? Agents and conversations that use it launch without one afterwards.`)})`}
    >
      <p class="muted small">Agents and conversations that use it launch without an environment afterwards.</p>
      <button class="secondary" type="submit">
        Delete {e.name}
      </button>
    </form>
  );

  app.get('/environments/:id/edit', async (c) => {
    const e = await load(c.get('user').account.id, c.req.param('id'));
    if (!e) return notFound(c);
    const names = (await svc.secretNames(e.id)).map((s) => s.key);
    return page(
      c,
      `Edit ${e.name}`,
      `/environments/${e.id}`,
      fromEnvironment(e),
      {},
      names,
      'Save',
      200,
      deleteForm(e),
    );
  });

  app.post('/environments/:id', async (c) => {
    const user = c.get('user');
    const e = await load(user.account.id, c.req.param('id'));
    if (!e) return notFound(c);
    const names = (await svc.secretNames(e.id)).map((s) => s.key);
    const parsed = parseEnvironmentForm(await c.req.parseBody());
    if (!parsed.ok)
      return page(
        c,
        `Edit ${e.name}`,
        `/environments/${e.id}`,
        parsed.values,
        parsed.errors,
        names,
        'Save',
        422,
        deleteForm(e),
      );
    const r = await svc.update(user.account.id, e.id, parsed.fields, parsed.secrets);
    if (!r.ok)
      return page(
        c,
        `Edit ${e.name}`,
        `/environments/${e.id}`,
        fromEnvironment(e),
        { name: 'You already have an environment with that name.' },
        names,
        'Save',
        409,
        deleteForm(e),
      );
    return c.redirect('/environments', 303);
  });

  app.post('/environments/:id/delete', async (c) => {
    const user = c.get('user');
    const e = await load(user.account.id, c.req.param('id'));
    if (!e) return notFound(c);
    await svc.delete(user.account.id, e.id);
    return c.redirect('/environments', 303);
  });

  return app;
}
