/**
 * Agents: the list, the create and edit pages around the agent form (agent-form.tsx), delete, and
 * starting a conversation with an agent in an environment it allows.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { agentWarner, createAgent, deleteAgent, getAgent, listAgents, updateAgent } from '../../agents/service.ts';
import type { Agent } from '../../store/conversation-schema.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout } from '../layout.tsx';
import type { Environment } from '../../store/environment-schema.ts';
import { inWords } from '../actions.ts';
import type { Db } from '../../store/db.ts';
import { chosenRunner, runnerOptions } from './runner-choice.tsx';
import {
  AgentForm,
  AgentWarnings,
  chosenEnvironment,
  ENV_ERROR,
  fromAgent,
  parseAgentForm,
  WARNINGS_PATH,
  type Choices,
  type Errors,
  type FormValues,
} from './agent-form.tsx';

export function agentRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const enabled = () => deps.registry.enabled();
  /** The model credentials the account has set, by name (undefined: this server has no credential service). */
  const credentialNames = async (accountId: string): Promise<string[] | undefined> =>
    deps.credentials ? (await deps.credentials.list(accountId)).map((r) => r.provider) : undefined;
  const runnersOf = (accountId: string) => runnerOptions(deps.db as unknown as Db, deps.runnerHost, accountId);
  const warningsOf = agentWarner({
    db: deps.db,
    registry: deps.registry,
    defaultProvider: deps.defaultProvider,
    allowUnenforced: deps.engine.brokerAllowUnenforced,
    environments: deps.environments,
  });

  app.get('/agents', async (c) => {
    const user = c.get('user');
    const agents = await listAgents(deps.db, user.account.id);
    return c.html(
      <Layout title="Agents" section="agents" user={userName(user)}>
        <h1>Agents</h1>
        <p>
          <a class="button" href="/agents/new">
            New agent
          </a>
        </p>
        {agents.length === 0 ? (
          <p class="muted">No agents yet.</p>
        ) : (
          <div class="table">
            <table class="stack">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Runtime</th>
                  <th scope="col">Model</th>
                  <th scope="col">Provider</th>
                  <th scope="col">
                    <span class="muted">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {agents.map((a) => (
                  <tr>
                    <td data-label="Name">
                      <strong>{a.name}</strong>
                    </td>
                    <td data-label="Runtime">{a.runtime}</td>
                    <td data-label="Model">{a.model}</td>
                    <td data-label="Provider">{a.sandboxProvider ?? `default (${deps.defaultProvider})`}</td>
                    <td class="actions">
                      <a href={`/agents/${a.id}/edit`} aria-label={`Edit ${a.name}`}>
                        Edit
                      </a>{' '}
                      <form
                        method="post"
                        action={`/agents/${a.id}/delete`}
                        class="inline"
                        onsubmit={`return confirm(${JSON.stringify(`Delete the agent ${a.name}? Its conversations stay, but cannot take new messages.`)})`}
                      >
                        <button type="submit" class="danger" aria-label={`Delete ${a.name}`}>
                          Delete
                        </button>
                      </form>
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

  // The form's placement as it stands, unsaved: asked by the form whenever a placement select changes.
  // Registered before /agents/:id, which would otherwise take "warnings" for an id.
  app.post(WARNINGS_PATH, async (c) => {
    const accountId = c.get('user').account.id;
    const body = await c.req.parseBody();
    const agentId = c.req.query('agent_id');
    const agent =
      agentId && z.string().uuid().safeParse(agentId).success ? await getAgent(deps.db, accountId, agentId) : undefined;
    const env = chosenEnvironment(body, await deps.environments.list(accountId));
    const runner = enabled().includes('runner')
      ? chosenRunner(body, await runnersOf(accountId))
      : ({ ok: true, id: agent?.runnerId ?? null } as const);
    // Without the provider select (one provider enabled) the form posts none: the agent's, or the default.
    const posted = typeof body.sandbox_provider === 'string' ? body.sandbox_provider : undefined;
    const provider =
      posted === undefined
        ? (agent?.sandboxProvider ?? null)
        : posted === '' || !(enabled() as readonly string[]).includes(posted)
          ? null
          : posted;
    const warnings = await warningsOf(accountId, {
      environmentId: env.ok ? env.id : null,
      sandboxProvider: provider,
      runnerId: runner.ok ? runner.id : null,
    });
    return c.html(<AgentWarnings warnings={warnings} />);
  });

  app.get('/agents/new', async (c) => {
    const accountId = c.get('user').account.id;
    const creds = await credentialNames(accountId);
    const choices: Choices = {
      environments: await deps.environments.list(accountId),
      environmentId: null,
      runners: await runnersOf(accountId),
      runnerId: null,
    };
    return c.html(
      <Layout title="New agent" section="agents" user={userName(c.get('user'))}>
        <h1>New agent</h1>
        <AgentForm
          credentialsSet={creds}
          action="/agents"
          values={fromAgent(undefined)}
          errors={{}}
          enabled={enabled()}
          defaultProvider={deps.defaultProvider}
          submit="Create agent"
          choices={choices}
          warnings={await warningsOf(accountId, { environmentId: null, sandboxProvider: null, runnerId: null })}
        />
      </Layout>,
    );
  });

  app.post('/agents', async (c) => {
    const user = c.get('user');
    const body = await c.req.parseBody();
    const parsed = parseAgentForm(body, enabled(), {
      defaultProvider: deps.defaultProvider,
      publicUrl: deps.publicUrl ?? null,
    });
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const runners = await runnersOf(user.account.id);
    const runner = chosenRunner(body, runners);
    const choices: Choices = {
      environments,
      environmentId: env.ok ? env.id : null,
      runners,
      runnerId: runner.ok ? runner.id : null,
    };
    const posted =
      typeof body.sandbox_provider === 'string' && (enabled() as readonly string[]).includes(body.sandbox_provider)
        ? body.sandbox_provider
        : null;
    const warnings = await warningsOf(user.account.id, {
      environmentId: choices.environmentId,
      sandboxProvider: posted,
      runnerId: choices.runnerId,
    });
    const creds = await credentialNames(user.account.id);
    const page = (values: FormValues, errors: Errors, status: 400 | 409 | 422) =>
      c.html(
        <Layout title="New agent" section="agents" user={userName(user)}>
          <h1>New agent</h1>
          <AgentForm
            credentialsSet={creds}
            action="/agents"
            values={values}
            errors={errors}
            enabled={enabled()}
            defaultProvider={deps.defaultProvider}
            submit="Create agent"
            choices={choices}
            warnings={warnings}
          />
        </Layout>,
        status,
      );
    if (!parsed.ok) return page(parsed.values, parsed.errors, 422);
    if (!env.ok) return page(fromAgent(undefined), { form: env.error }, 422);
    if (!runner.ok) return page(fromAgent(undefined), { form: runner.error }, 422);
    const r = await createAgent(deps.db, user.account.id, {
      ...parsed.fields,
      description: '',
      metadata: {},
      environmentId: env.id,
      runnerId: runner.id,
    });
    if (!r.ok) return page(fromAgent(undefined), { name: 'You already have an agent with that name.' }, 409);
    deps.engine.agentChanged(user.account.id, r.agent.id);
    // Saved, but its conversations would be refused at launch: the edit page shows why.
    if ((await warningsOf(user.account.id, r.agent)).length > 0)
      return c.redirect(`/agents/${r.agent.id}/edit?saved=1`, 303);
    // Created: the user lands on the agent, where its first conversation starts.
    return c.redirect(`/agents/${r.agent.id}/edit?created=1`, 303);
  });

  app.get('/agents/:id/edit', async (c) => {
    const user = c.get('user');
    const agent = z.string().uuid().safeParse(c.req.param('id')).success
      ? await getAgent(deps.db, user.account.id, c.req.param('id'))
      : undefined;
    if (!agent)
      return c.html(
        <Layout title="Not found" section="agents" user={userName(user)}>
          <h1>Agent not found</h1>
          <a href="/agents">All agents</a>
        </Layout>,
        404,
      );
    const environments = await deps.environments.list(user.account.id);
    const creds = await credentialNames(user.account.id);
    return c.html(
      <Layout title={`Edit ${agent.name}`} section="agents" user={userName(user)}>
        <h1>Edit {agent.name}</h1>
        {c.req.query('saved') === '1' ? (
          <p class="notice" role="status">
            Saved. Read the warning below: it would stop this agent's conversations when they start.
          </p>
        ) : null}
        {c.req.query('created') === '1' ? (
          <p class="notice" role="status" id="agent-created">
            Created {agent.name}. <a href="#start-conversation">Start a conversation</a> with it, or message it on the{' '}
            <a href="/">Team page</a>.
          </p>
        ) : null}
        <AgentForm
          credentialsSet={creds}
          action={`/agents/${agent.id}`}
          agentId={agent.id}
          warnings={await warningsOf(user.account.id, agent)}
          values={fromAgent(agent)}
          errors={{}}
          enabled={enabled()}
          defaultProvider={deps.defaultProvider}
          submit="Save"
          choices={{
            environments,
            environmentId: agent.environmentId,
            runners: await runnersOf(user.account.id),
            runnerId: agent.runnerId,
          }}
        />
        <StartConversation agent={agent} environments={environments} />
      </Layout>,
    );
  });

  app.post('/agents/:id', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const agent = z.string().uuid().safeParse(id).success ? await getAgent(deps.db, user.account.id, id) : undefined;
    if (!agent)
      return c.html(
        <Layout title="Not found" section="agents" user={userName(user)}>
          <h1>Agent not found</h1>
        </Layout>,
        404,
      );
    // A provider the agent already pins stays valid even if it was turned off since ("validated only when changed").
    const allowed = agent.sandboxProvider ? [...new Set([...enabled(), agent.sandboxProvider])] : enabled();
    const body = await c.req.parseBody();
    const parsed = parseAgentForm(body, allowed, {
      defaultProvider: deps.defaultProvider,
      publicUrl: deps.publicUrl ?? null,
    });
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const runners = await runnersOf(user.account.id);
    // Without the runner select (runners not enabled) the form posts none: keep the agent's pin.
    const runner = enabled().includes('runner')
      ? chosenRunner(body, runners)
      : ({ ok: true, id: agent.runnerId } as const);
    const choices: Choices = {
      environments,
      environmentId: env.ok ? env.id : agent.environmentId,
      runners,
      runnerId: runner.ok ? runner.id : agent.runnerId,
    };
    const posted =
      typeof body.sandbox_provider === 'string'
        ? allowed.includes(body.sandbox_provider)
          ? body.sandbox_provider
          : null
        : agent.sandboxProvider;
    const warnings = await warningsOf(user.account.id, {
      environmentId: choices.environmentId,
      sandboxProvider: posted,
      runnerId: choices.runnerId,
    });
    const creds = await credentialNames(user.account.id);
    const page = (values: FormValues, errors: Errors, status: 409 | 422) =>
      c.html(
        <Layout title={`Edit ${agent.name}`} section="agents" user={userName(user)}>
          <h1>Edit {agent.name}</h1>
          <AgentForm
            credentialsSet={creds}
            action={`/agents/${agent.id}`}
            values={values}
            errors={errors}
            enabled={enabled()}
            defaultProvider={deps.defaultProvider}
            submit="Save"
            choices={choices}
            warnings={warnings}
            agentId={agent.id}
          />
        </Layout>,
        status,
      );
    if (!parsed.ok) return page(parsed.values, parsed.errors, 422);
    if (!env.ok) return page(fromAgent(agent), { form: env.error }, 422);
    if (!runner.ok) return page(fromAgent(agent), { form: runner.error }, 422);
    // Without the select (one provider) the form posts no provider: keep what the agent has.
    const fields = {
      ...(enabled().length >= 2 ? parsed.fields : { ...parsed.fields, sandboxProvider: agent.sandboxProvider }),
      environmentId: env.id,
      runnerId: runner.id,
    };
    const r = await updateAgent(deps.db, user.account.id, id, fields);
    if (!r.ok) return page(fromAgent(agent), { name: 'You already have an agent with that name.' }, 409);
    deps.engine.agentChanged(user.account.id, id);
    if (r.agent && (await warningsOf(user.account.id, r.agent)).length > 0)
      return c.redirect(`/agents/${id}/edit?saved=1`, 303);
    return c.redirect('/agents', 303);
  });

  app.post('/agents/:id/delete', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const gone = z.string().uuid().safeParse(id).success && (await deleteAgent(deps.db, user.account.id, id));
    if (gone) deps.engine.agentChanged(user.account.id, id);
    if (!gone)
      return c.html(
        <Layout title="Not found" section="agents" user={userName(user)}>
          <h1>Agent not found</h1>
          <a href="/agents">All agents</a>
        </Layout>,
        404,
      );
    return c.redirect('/agents', 303);
  });

  // A conversation with this agent in the environment the form picks (the agent's, or another it allows).
  app.post('/agents/:id/conversations', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const agent = z.string().uuid().safeParse(id).success ? await getAgent(deps.db, user.account.id, id) : undefined;
    if (!agent)
      return c.html(
        <Layout title="Not found" section="agents" user={userName(user)}>
          <h1>Agent not found</h1>
        </Layout>,
        404,
      );
    const body = await c.req.parseBody();
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const prompt =
      typeof body.prompt === 'string' && body.prompt.trim() !== '' ? body.prompt.slice(0, 200_000) : undefined;
    const created = env.ok
      ? await deps.engine.create(user.account.id, {
          agentId: agent.id,
          prompt,
          ...(env.id && env.id !== agent.environmentId ? { environmentId: env.id } : {}),
        })
      : null;
    if (created?.ok) return c.redirect(`/conversations/${created.value.id}`, 303);
    const message = created ? inWords(created.error).message : ENV_ERROR;
    return c.html(
      <Layout title={`Edit ${agent.name}`} section="agents" user={userName(user)}>
        <h1>Edit {agent.name}</h1>
        <StartConversation agent={agent} environments={environments} error={message} />
      </Layout>,
      422,
    );
  });

  return app;
}

/** Starts a conversation with the agent, choosing its environment for this launch. */
function StartConversation(p: { agent: Agent; environments: readonly Environment[]; error?: string }) {
  const allowed = p.agent.allowedEnvironmentIds;
  const choices = p.environments.filter(
    (e) => e.id === p.agent.environmentId || allowed === null || allowed.includes(e.id),
  );
  return (
    <form method="post" action={`/agents/${p.agent.id}/conversations`} class="card" id="start-conversation">
      <h2>Start a conversation</h2>
      <ErrorNote id="start_error" message={p.error} />
      <div class="field">
        <label for="start_environment">Environment for this conversation</label>
        <select id="start_environment" name="environment_id">
          <option value={p.agent.environmentId ?? ''} selected>
            The agent's ({p.environments.find((e) => e.id === p.agent.environmentId)?.name ?? 'none'})
          </option>
          {choices
            .filter((e) => e.id !== p.agent.environmentId)
            .map((e) => (
              <option value={e.id}>{e.name}</option>
            ))}
        </select>
      </div>
      <div class="field">
        <label for="start_prompt">First message (optional)</label>
        <textarea id="start_prompt" name="prompt" rows={2}></textarea>
      </div>
      <p>
        <button type="submit">Start</button>
      </p>
    </form>
  );
}
