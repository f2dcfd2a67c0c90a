/**
 * Agents: the list, and the create/edit form (runtime, model, system prompt, permission policy, a runner choice,
 * and a sandbox-provider select that appears only when two or more providers are enabled, its options from the registry).
 */
import { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import { z } from 'zod';
import { createAgent, deleteAgent, getAgent, listAgents, RUNTIMES, updateAgent, VERDICTS, type AgentFields } from '../../agents/service.ts';
import type { Agent, PermissionPolicy, Runtime, Verdict } from '../../store/conversation-schema.ts';
import { MODEL_PATTERN, RUNTIME_SPECS } from '../../agents/runtimes.ts';
import { TOOL_KINDS } from '../../conversations/policy.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { userName } from '../context.ts';
import { ErrorNote, Layout } from '../layout.tsx';
import type { Environment } from '../../store/environment-schema.ts';
import { inWords } from '../actions.ts';
import type { Db } from '../../store/db.ts';
import { RunnerChoice, RUNNER_GONE, chosenRunner, runnerOptions, type RunnerOption } from './runner-choice.tsx';

const ENV_ERROR = 'That environment does not exist (any more).';

/** Which model providers a runtime accepts, and the model the form suggests: the runtime table's, never a copy. */
const modelProviders = (r: Runtime): readonly string[] => RUNTIME_SPECS[r].modelProviders;
const modelExample = (r: Runtime): string => RUNTIME_SPECS[r].models[0]!;
/** The form has a select per ACP tool kind, the kinds the engine's policy lookup knows. */
const POLICY_KEYS = TOOL_KINDS;

type Errors = Partial<Record<'name' | 'runtime' | 'model' | 'system' | 'sandbox_provider' | 'permission_policy' | 'form', string>>;

interface FormValues {
  name: string;
  runtime: string;
  model: string;
  system: string;
  sandbox_provider: string;
  policy: Record<string, string>;
}

export const fromAgent = (a: Agent | undefined): FormValues => ({
  name: a?.name ?? '',
  runtime: a?.runtime ?? 'demo',
  model: a?.model ?? modelExample('demo'),
  system: a?.system ?? '',
  sandbox_provider: a?.sandboxProvider ?? '',
  // A new agent asks before it uses a tool, unless the user chooses otherwise: its runner may run as the user.
  policy: a ? { ...a.permissionPolicy } : { default: 'ask' },
});

const verdict = z.enum(VERDICTS);

/** Validates the posted form into agent fields, or the error to show beside each field. */
export function parseAgentForm(body: Record<string, unknown>, enabled: readonly string[]): { ok: true; fields: Omit<AgentFields, 'description' | 'metadata'> } | { ok: false; errors: Errors; values: FormValues } {
  const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
  const values: FormValues = {
    name: str('name').trim(),
    runtime: str('runtime'),
    model: str('model').trim(),
    system: str('system'),
    sandbox_provider: str('sandbox_provider'),
    policy: Object.fromEntries(['default', ...POLICY_KEYS].map((k) => [k, str(`policy_${k}`)]).filter(([, v]) => v !== '')),
  };
  const errors: Errors = {};
  if (values.name.length < 1 || values.name.length > 200) errors.name = 'A name is required (at most 200 characters).';
  const runtime = z.enum(RUNTIMES).safeParse(values.runtime);
  if (!runtime.success) errors.runtime = `Pick a runtime: ${RUNTIMES.join(', ')}.`;
  if (!MODEL_PATTERN.test(values.model)) errors.model = 'A model is written provider/model, e.g. anthropic/claude-sonnet-4-5 (lower case).';
  else if (runtime.success && !modelProviders(runtime.data).includes(values.model.slice(0, values.model.indexOf('/')))) {
    errors.model = `The ${runtime.data} runtime takes models from ${modelProviders(runtime.data).join(' or ')}, e.g. ${modelExample(runtime.data)}.`;
  }
  if (values.system.length > 100_000) errors.system = 'The system prompt is limited to 100,000 characters.';
  if (values.sandbox_provider !== '' && !enabled.includes(values.sandbox_provider)) {
    errors.sandbox_provider = `${values.sandbox_provider} is not configured on this server.`;
  }
  const policy: PermissionPolicy = {};
  for (const [k, v] of Object.entries(values.policy)) {
    const p = verdict.safeParse(v);
    if (!p.success) errors.permission_policy = `Each rule is one of ${VERDICTS.join(', ')}.`;
    else policy[k] = p.data as Verdict;
  }
  if (Object.keys(errors).length > 0 || !runtime.success) return { ok: false, errors, values };
  return {
    ok: true,
    fields: { name: values.name, runtime: runtime.data, model: values.model, system: values.system, sandboxProvider: values.sandbox_provider || null, permissionPolicy: policy },
  };
}

function Field(p: { id: string; label: string; error?: string | undefined; hint?: string; children: Child }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      {p.children}
      {p.hint ? (
        <p class="muted small" id={`${p.id}_hint`}>
          {p.hint}
        </p>
      ) : null}
      <ErrorNote id={`${p.id}_error`} message={p.error} />
    </div>
  );
}

const described = (id: string, hint: boolean, error: string | undefined) => ({
  'aria-describedby': [hint ? `${id}_hint` : '', error ? `${id}_error` : ''].filter(Boolean).join(' ') || undefined,
  'aria-invalid': error ? 'true' : undefined,
});

/** The agent form's environment choice: what its sandboxes are provisioned with. */
function EnvironmentChoice(p: { environments: readonly Environment[]; selected: string | null; error?: string | undefined }) {
  return (
    <div class="field">
      <label for="environment_id">Environment</label>
      <select id="environment_id" name="environment_id" aria-describedby="environment_id_hint">
        <option value="" selected={!p.selected}>
          None
        </option>
        {p.environments.map((e) => (
          <option value={e.id} selected={p.selected === e.id}>
            {e.name}
            {e.networkingType === 'limited' ? ' (limited network)' : ''}
          </option>
        ))}
      </select>
      <p class="muted small" id="environment_id_hint">
        Variables, secrets, packages, repositories and setup its sandboxes get. <a href="/environments">Manage environments</a>.
      </p>
      <ErrorNote id="environment_id_error" message={p.error} />
    </div>
  );
}

/** The environment the form chose: '' is none; an id must be one of the account's. */
function chosenEnvironment(body: Record<string, unknown>, environments: readonly Environment[]): { ok: true; id: string | null } | { ok: false; error: string } {
  const v = typeof body.environment_id === 'string' ? body.environment_id : '';
  if (v === '') return { ok: true, id: null };
  return environments.some((e) => e.id === v) ? { ok: true, id: v } : { ok: false, error: 'That environment does not exist (any more).' };
}

interface Choices {
  readonly environments: readonly Environment[];
  readonly environmentId: string | null;
  readonly runners: readonly RunnerOption[];
  readonly runnerId: string | null;
}

function AgentForm(p: { action: string; values: FormValues; errors: Errors; enabled: readonly string[]; defaultProvider: string; submit: string; choices: Choices }) {
  const v = p.values;
  const e = p.errors;
  return (
    <form method="post" action={p.action} class="card" novalidate>
      <ErrorNote message={e.form} />
      <Field id="name" label="Name" error={e.name}>
        <input id="name" name="name" type="text" value={v.name} required maxlength={200} {...described('name', false, e.name)} />
      </Field>
      <Field id="runtime" label="Runtime" error={e.runtime} hint="demo needs no model and no network.">
        <select id="runtime" name="runtime" {...described('runtime', true, e.runtime)}>
          {RUNTIMES.map((r) => (
            <option value={r} selected={v.runtime === r}>
              {r}
            </option>
          ))}
        </select>
      </Field>
      <Field id="model" label="Model" error={e.model} hint="provider/model — e.g. anthropic/claude-sonnet-4-5; the demo runtime uses fountain/demo.">
        <input id="model" name="model" type="text" value={v.model} required {...described('model', true, e.model)} />
      </Field>
      {p.enabled.length >= 2 ? (
        <Field id="sandbox_provider" label="Sandbox provider" error={e.sandbox_provider} hint="Where this agent's sandboxes run.">
          <select id="sandbox_provider" name="sandbox_provider" {...described('sandbox_provider', true, e.sandbox_provider)}>
            <option value="" selected={v.sandbox_provider === ''}>
              Instance default ({p.defaultProvider})
            </option>
            {p.enabled.map((prov) => (
              <option value={prov} selected={v.sandbox_provider === prov}>
                {prov}
              </option>
            ))}
          </select>
        </Field>
      ) : null}
      {p.enabled.includes('runner') ? <RunnerChoice runners={p.choices.runners} selected={p.choices.runnerId} error={e.form === RUNNER_GONE ? e.form : undefined} /> : null}
      <EnvironmentChoice environments={p.choices.environments} selected={p.choices.environmentId} error={e.form === ENV_ERROR ? e.form : undefined} />
      <Field id="system" label="System prompt" error={e.system}>
        <textarea id="system" name="system" rows={5} {...described('system', false, e.system)}>
          {v.system}
        </textarea>
      </Field>
      <fieldset>
        <legend>Permission policy</legend>
        <p class="muted small">
          What happens when the agent asks to use a tool of each kind. "ask" shows the request as buttons in the conversation; an automatic allow
          answers "allow once", never "always". Rules for a runtime's own tool names (Claude's Bash, Edit, …) can be set through the API.
        </p>
        <ErrorNote id="permission_policy_error" message={e.permission_policy} />
        <div class="grid" style="grid-template-columns:repeat(auto-fill,minmax(160px,1fr))">
          {['default', ...POLICY_KEYS].map((k) => (
            <div>
              <label for={`policy_${k}`}>{k === 'default' ? 'Default' : k}</label>
              <select id={`policy_${k}`} name={`policy_${k}`}>
                <option value="" selected={!v.policy[k]}>
                  {k === 'default' ? '(auto_allow)' : '(default)'}
                </option>
                {VERDICTS.map((x) => (
                  <option value={x} selected={v.policy[k] === x}>
                    {x}
                  </option>
                ))}
              </select>
            </div>
          ))}
        </div>
      </fieldset>
      <p>
        <button type="submit">{p.submit}</button>
      </p>
    </form>
  );
}

export function agentRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const enabled = () => deps.registry.enabled();
  const runnersOf = (accountId: string) => runnerOptions(deps.db as unknown as Db, deps.runnerHost, accountId);

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
                      <form method="post" action={`/agents/${a.id}/delete`} class="inline" onsubmit={`return confirm(${JSON.stringify(`Delete the agent ${a.name}? Its conversations stay, but cannot take new messages.`)})`}>
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

  app.get('/agents/new', async (c) => {
    const accountId = c.get('user').account.id;
    const choices: Choices = { environments: await deps.environments.list(accountId), environmentId: null, runners: await runnersOf(accountId), runnerId: null };
    return c.html(
      <Layout title="New agent" section="agents" user={userName(c.get('user'))}>
        <h1>New agent</h1>
        <AgentForm action="/agents" values={fromAgent(undefined)} errors={{}} enabled={enabled()} defaultProvider={deps.defaultProvider} submit="Create agent" choices={choices} />
      </Layout>,
    );
  });

  app.post('/agents', async (c) => {
    const user = c.get('user');
    const body = await c.req.parseBody();
    const parsed = parseAgentForm(body, enabled());
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const runners = await runnersOf(user.account.id);
    const runner = chosenRunner(body, runners);
    const choices: Choices = { environments, environmentId: env.ok ? env.id : null, runners, runnerId: runner.ok ? runner.id : null };
    const page = (values: FormValues, errors: Errors, status: 400 | 409 | 422) =>
      c.html(
        <Layout title="New agent" section="agents" user={userName(user)}>
          <h1>New agent</h1>
          <AgentForm action="/agents" values={values} errors={errors} enabled={enabled()} defaultProvider={deps.defaultProvider} submit="Create agent" choices={choices} />
        </Layout>,
        status,
      );
    if (!parsed.ok) return page(parsed.values, parsed.errors, 422);
    if (!env.ok) return page(fromAgent(undefined), { form: env.error }, 422);
    if (!runner.ok) return page(fromAgent(undefined), { form: runner.error }, 422);
    const r = await createAgent(deps.db, user.account.id, { ...parsed.fields, description: '', metadata: {}, environmentId: env.id, runnerId: runner.id });
    if (!r.ok) return page(fromAgent(undefined), { name: 'You already have an agent with that name.' }, 409);
    return c.redirect('/', 303);
  });

  app.get('/agents/:id/edit', async (c) => {
    const user = c.get('user');
    const agent = z.string().uuid().safeParse(c.req.param('id')).success ? await getAgent(deps.db, user.account.id, c.req.param('id')) : undefined;
    if (!agent) return c.html(<Layout title="Not found" section="agents" user={userName(user)}><h1>Agent not found</h1><a href="/agents">All agents</a></Layout>, 404);
    const environments = await deps.environments.list(user.account.id);
    return c.html(
      <Layout title={`Edit ${agent.name}`} section="agents" user={userName(user)}>
        <h1>Edit {agent.name}</h1>
        <AgentForm
          action={`/agents/${agent.id}`}
          values={fromAgent(agent)}
          errors={{}}
          enabled={enabled()}
          defaultProvider={deps.defaultProvider}
          submit="Save"
          choices={{ environments, environmentId: agent.environmentId, runners: await runnersOf(user.account.id), runnerId: agent.runnerId }}
        />
        <StartConversation agent={agent} environments={environments} />
      </Layout>,
    );
  });

  app.post('/agents/:id', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const agent = z.string().uuid().safeParse(id).success ? await getAgent(deps.db, user.account.id, id) : undefined;
    if (!agent) return c.html(<Layout title="Not found" section="agents" user={userName(user)}><h1>Agent not found</h1></Layout>, 404);
    // A provider the agent already pins stays valid even if it was turned off since ("validated only when changed").
    const allowed = agent.sandboxProvider ? [...new Set([...enabled(), agent.sandboxProvider])] : enabled();
    const body = await c.req.parseBody();
    const parsed = parseAgentForm(body, allowed);
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const runners = await runnersOf(user.account.id);
    // Without the runner select (runners not enabled) the form posts none: keep the agent's pin.
    const runner = enabled().includes('runner') ? chosenRunner(body, runners) : ({ ok: true, id: agent.runnerId } as const);
    const choices: Choices = { environments, environmentId: env.ok ? env.id : agent.environmentId, runners, runnerId: runner.ok ? runner.id : agent.runnerId };
    const page = (values: FormValues, errors: Errors, status: 409 | 422) =>
      c.html(
        <Layout title={`Edit ${agent.name}`} section="agents" user={userName(user)}>
          <h1>Edit {agent.name}</h1>
          <AgentForm action={`/agents/${agent.id}`} values={values} errors={errors} enabled={enabled()} defaultProvider={deps.defaultProvider} submit="Save" choices={choices} />
        </Layout>,
        status,
      );
    if (!parsed.ok) return page(parsed.values, parsed.errors, 422);
    if (!env.ok) return page(fromAgent(agent), { form: env.error }, 422);
    if (!runner.ok) return page(fromAgent(agent), { form: runner.error }, 422);
    // Without the select (one provider) the form posts no provider: keep what the agent has.
    const fields = { ...(enabled().length >= 2 ? parsed.fields : { ...parsed.fields, sandboxProvider: agent.sandboxProvider }), environmentId: env.id, runnerId: runner.id };
    const r = await updateAgent(deps.db, user.account.id, id, fields);
    if (!r.ok) return page(fromAgent(agent), { name: 'You already have an agent with that name.' }, 409);
    return c.redirect('/agents', 303);
  });

  app.post('/agents/:id/delete', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const gone = z.string().uuid().safeParse(id).success && (await deleteAgent(deps.db, user.account.id, id));
    if (!gone) return c.html(<Layout title="Not found" section="agents" user={userName(user)}><h1>Agent not found</h1><a href="/agents">All agents</a></Layout>, 404);
    return c.redirect('/agents', 303);
  });

  // A conversation with this agent in the environment the form picks (the agent's, or another it allows).
  app.post('/agents/:id/conversations', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const agent = z.string().uuid().safeParse(id).success ? await getAgent(deps.db, user.account.id, id) : undefined;
    if (!agent) return c.html(<Layout title="Not found" section="agents" user={userName(user)}><h1>Agent not found</h1></Layout>, 404);
    const body = await c.req.parseBody();
    const environments = await deps.environments.list(user.account.id);
    const env = chosenEnvironment(body, environments);
    const prompt = typeof body.prompt === 'string' && body.prompt.trim() !== '' ? body.prompt.slice(0, 200_000) : undefined;
    const created = env.ok
      ? await deps.engine.create(user.account.id, { agentId: agent.id, prompt, ...(env.id && env.id !== agent.environmentId ? { environmentId: env.id } : {}) })
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
  const choices = p.environments.filter((e) => e.id === p.agent.environmentId || allowed === null || allowed.includes(e.id));
  return (
    <form method="post" action={`/agents/${p.agent.id}/conversations`} class="card">
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
