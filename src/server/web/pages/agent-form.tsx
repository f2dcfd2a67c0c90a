/**
 * The agent form: its fields (runtime, model, system prompt, permission policy, runner, environment, and a
 * sandbox-provider select only when two or more providers are enabled), and the parse of what it posts.
 *
 * Over 400 lines because the form and its parse are kept side by side; the launch fields already live
 * in agent-launch-fields.tsx, and the environment and policy fieldsets could follow.
 */
import { CREDENTIAL_DELIVERIES, gatewayReach, type CredentialDelivery } from '../../gateway/reach.ts';
import { credentialsFor } from '../../credentials/providers.ts';
import type { Child } from 'hono/jsx';
import { z } from 'zod';
import { RUNTIMES, VERDICTS, type AgentFields, type AgentWarning } from '../../agents/service.ts';
import type { Agent, PermissionPolicy, Runtime, Verdict } from '../../store/conversation-schema.ts';
import { MODEL_PATTERN, RUNTIME_SPECS } from '../../runtimes/table.ts';
import { TOOL_KINDS } from '../../conversations/policy.ts';
import { ErrorNote, Field } from '../layout.tsx';
import type { Environment } from '../../store/environment-schema.ts';
import { RunnerChoice, RUNNER_GONE, type RunnerOption } from './runner-choice.tsx';
import { CredentialWarning, ModelData, modelHint } from './model-hints.tsx';
import {
  LaunchFieldset,
  launchFromAgent,
  launchValuesOf,
  parseLaunch,
  type LaunchErrors,
  type LaunchValues,
} from './agent-launch-fields.tsx';

export const ENV_ERROR = 'That environment does not exist (any more).';

/** Which model providers a runtime accepts, and the model the form suggests: the runtime table's, never a copy. */
const modelProviders = (r: Runtime): readonly string[] => RUNTIME_SPECS[r].modelProviders;
const modelExample = (r: Runtime): string => RUNTIME_SPECS[r].models[0]!;
/** The form has a select per ACP tool kind, the kinds the engine's policy lookup knows. */
const POLICY_KEYS = TOOL_KINDS;
/** Each tool kind as a reader says what the agent does (the page never shows `switch_mode` or `other`). */
const POLICY_WORDS: Readonly<Record<(typeof POLICY_KEYS)[number] | 'default', string>> = {
  default: 'Anything not set below',
  read: 'Reads files',
  edit: 'Edits files',
  delete: 'Deletes files',
  move: 'Moves files',
  search: 'Searches',
  execute: 'Runs commands',
  think: 'Thinks',
  fetch: 'Fetches from the web',
  switch_mode: 'Changes its mode',
  other: 'Anything else',
};
/** The verdicts in words. */
const VERDICT_WORDS: Readonly<Record<string, string>> = {
  ask: 'Ask me',
  auto_allow: 'Allow',
  auto_deny: 'Refuse',
};

export type Errors = Partial<
  Record<
    'name' | 'runtime' | 'model' | 'system' | 'sandbox_provider' | 'credential_delivery' | 'permission_policy' | 'form',
    string
  >
> &
  LaunchErrors;

export interface FormValues {
  name: string;
  runtime: string;
  model: string;
  system: string;
  sandbox_provider: string;
  credential_delivery: string;
  policy: Record<string, string>;
  launch: LaunchValues;
}

export const fromAgent = (a: Agent | undefined): FormValues => ({
  name: a?.name ?? '',
  runtime: a?.runtime ?? 'demo',
  model: a?.model ?? modelExample('demo'),
  system: a?.system ?? '',
  sandbox_provider: a?.sandboxProvider ?? '',
  credential_delivery: a?.credentialDelivery ?? 'gateway',
  // A new agent asks before it uses a tool, unless the user chooses otherwise: its runner may run as the user.
  policy: a ? { ...a.permissionPolicy } : { default: 'ask' },
  launch: launchFromAgent(a),
});

const verdict = z.enum(VERDICTS);

/** Validates the posted form into agent fields, or the error to show beside each field. */
export function parseAgentForm(
  body: Record<string, unknown>,
  enabled: readonly string[],
  gateway: { readonly defaultProvider: string; readonly publicUrl: string | null } = {
    defaultProvider: 'runner',
    publicUrl: null,
  },
):
  | {
      ok: true;
      fields: Omit<AgentFields, 'description' | 'metadata'> & {
        credentialDelivery: CredentialDelivery;
        customRuntime: Agent['customRuntime'];
        credentialSet: string;
        sessionSettings: Agent['sessionSettings'];
        warmPool: number;
      };
    }
  | { ok: false; errors: Errors; values: FormValues } {
  const str = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
  const values: FormValues = {
    name: str('name').trim(),
    runtime: str('runtime'),
    model: str('model').trim(),
    system: str('system'),
    sandbox_provider: str('sandbox_provider'),
    credential_delivery: str('credential_delivery') || 'gateway',
    policy: Object.fromEntries(
      ['default', ...POLICY_KEYS].map((k) => [k, str(`policy_${k}`)]).filter(([, v]) => v !== ''),
    ),
    launch: launchValuesOf(str),
  };
  const errors: Errors = {};
  if (values.name.length < 1 || values.name.length > 200) errors.name = 'A name is required (at most 200 characters).';
  const runtime = z.enum(RUNTIMES).safeParse(values.runtime);
  if (!runtime.success) errors.runtime = `Pick a runtime: ${RUNTIMES.join(', ')}.`;
  if (!MODEL_PATTERN.test(values.model))
    errors.model = 'A model is written provider/model, e.g. anthropic/claude-sonnet-4-5 (lower case).';
  else if (
    runtime.success &&
    runtime.data !== 'custom' &&
    !modelProviders(runtime.data).includes(values.model.slice(0, values.model.indexOf('/')))
  ) {
    errors.model = `The ${runtime.data} runtime takes models from ${modelProviders(runtime.data).join(' or ')}, e.g. ${modelExample(runtime.data)}.`;
  }
  if (values.system.length > 100_000) errors.system = 'The system prompt is limited to 100,000 characters.';
  if (values.sandbox_provider !== '' && !enabled.includes(values.sandbox_provider)) {
    errors.sandbox_provider = `${values.sandbox_provider} is not configured on this server.`;
  }
  const delivery = z.enum(CREDENTIAL_DELIVERIES).safeParse(values.credential_delivery);
  const launch = parseLaunch(values.launch, values.runtime, delivery.success ? delivery.data : 'gateway');
  if (!launch.ok) Object.assign(errors, launch.errors);
  const custom = launch.ok ? launch.customRuntime : null;
  if (!delivery.success) errors.credential_delivery = 'Pick gateway or direct.';
  else if (
    delivery.data === 'gateway' &&
    runtime.success &&
    credentialsFor(runtime.data, values.model, custom).length > 0
  ) {
    const reach = gatewayReach(values.sandbox_provider || gateway.defaultProvider, gateway.publicUrl, 'listen address');
    if (!reach.ok) errors.credential_delivery = reach.message;
  }
  const policy: PermissionPolicy = {};
  for (const [k, v] of Object.entries(values.policy)) {
    const p = verdict.safeParse(v);
    if (!p.success)
      errors.permission_policy = `Each rule is one of: ${VERDICTS.map((x) => VERDICT_WORDS[x] ?? x).join(', ')}.`;
    else policy[k] = p.data as Verdict;
  }
  if (Object.keys(errors).length > 0 || !runtime.success || !delivery.success || !launch.ok)
    return { ok: false, errors, values };
  return {
    ok: true,
    fields: {
      name: values.name,
      runtime: runtime.data,
      model: values.model,
      system: values.system,
      sandboxProvider: values.sandbox_provider || null,
      permissionPolicy: policy,
      credentialDelivery: delivery.data,
      customRuntime: launch.customRuntime,
      credentialSet: launch.credentialSet,
      sessionSettings: launch.sessionSettings,
      warmPool: launch.warmPool,
    },
  };
}

const described = (id: string, hint: boolean, error: string | undefined) => ({
  'aria-describedby': [hint ? `${id}_hint` : '', error ? `${id}_error` : ''].filter(Boolean).join(' ') || undefined,
  'aria-invalid': error ? 'true' : undefined,
});

/** The agent form's environment choice: what its sandboxes are provisioned with. */
function EnvironmentChoice(p: {
  environments: readonly Environment[];
  selected: string | null;
  error?: string | undefined;
}) {
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
        Variables, secrets, packages, repositories and setup its sandboxes get.{' '}
        <a href="/environments">Manage environments</a>.
      </p>
      <ErrorNote id="environment_id_error" message={p.error} />
    </div>
  );
}

/** The environment the form chose: '' is none; an id must be one of the account's. */
export function chosenEnvironment(
  body: Record<string, unknown>,
  environments: readonly Environment[],
): { ok: true; id: string | null } | { ok: false; error: string } {
  const v = typeof body.environment_id === 'string' ? body.environment_id : '';
  if (v === '') return { ok: true, id: null };
  return environments.some((e) => e.id === v)
    ? { ok: true, id: v }
    : { ok: false, error: 'That environment does not exist (any more).' };
}

export interface Choices {
  readonly environments: readonly Environment[];
  readonly environmentId: string | null;
  readonly runners: readonly RunnerOption[];
  readonly runnerId: string | null;
}

export const WARNINGS_PATH = '/agents/warnings';

/**
 * What would refuse this configuration's conversations at launch, beside the placement controls: the
 * notices alone, which is also what the warnings route answers.
 */
export function AgentWarnings(p: { warnings: readonly AgentWarning[] }) {
  return (
    <div id="agent_warnings" aria-live="polite">
      {p.warnings.map((w) => (
        <p class="notice" data-code={w.code}>
          {w.message}
        </p>
      ))}
    </div>
  );
}

/**
 * The notices' host asks the server again whenever the environment, provider or runner select changes,
 * before anything is saved. It stays in the page and only its content is swapped: when the element
 * holding the listeners was itself replaced, a change made while the swap settled was never heard
 * (two quick changes showed the first one's answer). A change made while a request is on its way waits
 * for it and then asks again (only the latest waits): htmx logs an aborted request as a console error.
 */
function AgentWarningsHost(p: {
  warnings: readonly AgentWarning[];
  selects: readonly string[];
  agentId?: string | undefined;
}) {
  const trigger = p.selects.map((id) => `change from:#${id}`).join(', ');
  const url = p.agentId ? `${WARNINGS_PATH}?agent_id=${encodeURIComponent(p.agentId)}` : WARNINGS_PATH;
  return (
    <div
      hx-post={url}
      hx-trigger={trigger}
      hx-sync="this:queue last"
      hx-include="closest form"
      hx-target="this"
      hx-swap="innerHTML"
    >
      <AgentWarnings warnings={p.warnings} />
    </div>
  );
}

export function AgentForm(p: {
  action: string;
  values: FormValues;
  errors: Errors;
  enabled: readonly string[];
  defaultProvider: string;
  submit: string;
  choices: Choices;
  warnings?: readonly AgentWarning[];
  /** The agent being edited: the warnings keep what the form does not post (its provider, its pin). */
  agentId?: string;
  /** The model credentials the account has set (names only): the form warns when the model's is missing. */
  credentialsSet?: readonly string[] | undefined;
}) {
  const v = p.values;
  const e = p.errors;
  const selects = [
    'environment_id',
    ...(p.enabled.length >= 2 ? ['sandbox_provider'] : []),
    ...(p.enabled.includes('runner') ? ['runner_id'] : []),
  ];
  return (
    <form method="post" action={p.action} class="card" novalidate>
      <ErrorNote message={e.form} />
      <Field id="name" label="Name" error={e.name}>
        <input
          id="name"
          name="name"
          type="text"
          value={v.name}
          required
          maxlength={200}
          {...described('name', false, e.name)}
        />
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
      <Field id="model" label="Model" error={e.model} hint={modelHint(v.runtime)}>
        <input id="model" name="model" type="text" value={v.model} required {...described('model', true, e.model)} />
      </Field>
      <LaunchFieldset values={v.launch} errors={e} />
      {p.credentialsSet ? (
        <>
          <CredentialWarning runtime={v.runtime} model={v.model} set={p.credentialsSet} />
          <ModelData set={p.credentialsSet} />
        </>
      ) : null}
      {p.enabled.length >= 2 ? (
        <Field
          id="sandbox_provider"
          label="Sandbox provider"
          error={e.sandbox_provider}
          hint="Where this agent's sandboxes run."
        >
          <select
            id="sandbox_provider"
            name="sandbox_provider"
            {...described('sandbox_provider', true, e.sandbox_provider)}
          >
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
      {p.enabled.includes('runner') ? (
        <RunnerChoice
          runners={p.choices.runners}
          selected={p.choices.runnerId}
          error={e.form === RUNNER_GONE ? e.form : undefined}
        />
      ) : null}
      <Field
        id="credential_delivery"
        label="How the agent gets its key"
        error={e.credential_delivery}
        hint="Through the gateway, the agent reaches its model through this server with a per-conversation token: the key never enters the sandbox, and every call is metered and held to the agent's limits. Direct puts the key in the agent process's environment, where any command it runs can read it."
      >
        <select
          id="credential_delivery"
          name="credential_delivery"
          {...described('credential_delivery', true, e.credential_delivery)}
        >
          <option value="gateway" selected={v.credential_delivery !== 'direct'}>
            Through the model gateway (recommended)
          </option>
          <option value="direct" selected={v.credential_delivery === 'direct'}>
            Direct: the key in the sandbox
          </option>
        </select>
      </Field>
      <EnvironmentChoice
        environments={p.choices.environments}
        selected={p.choices.environmentId}
        error={e.form === ENV_ERROR ? e.form : undefined}
      />
      <AgentWarningsHost warnings={p.warnings ?? []} selects={selects} agentId={p.agentId} />
      <Field id="system" label="System prompt" error={e.system}>
        <textarea id="system" name="system" rows={5} {...described('system', false, e.system)}>
          {v.system}
        </textarea>
      </Field>
      <fieldset>
        <legend>Permission policy</legend>
        <p class="muted small">
          What happens when the agent wants to do each of these. "Ask me" shows the request as buttons in the
          conversation; "Allow" answers "allow once", never "always". Rules for a runtime's own tool names (Claude's
          Bash, Edit, …) can be set through the API.
        </p>
        <ErrorNote id="permission_policy_error" message={e.permission_policy} />
        <div class="grid" style="grid-template-columns:repeat(auto-fill,minmax(160px,1fr))">
          {['default', ...POLICY_KEYS].map((k) => (
            <div>
              <label for={`policy_${k}`}>{POLICY_WORDS[k as keyof typeof POLICY_WORDS] ?? k}</label>
              <select id={`policy_${k}`} name={`policy_${k}`}>
                <option value="" selected={!v.policy[k]}>
                  {k === 'default' ? 'Allow (unless set)' : 'As for anything not set'}
                </option>
                {VERDICTS.map((x) => (
                  <option value={x} selected={v.policy[k] === x}>
                    {VERDICT_WORDS[x] ?? x}
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
