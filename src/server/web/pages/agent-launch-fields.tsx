/**
 * The agent form's launch fields: a custom runtime's command, install, env and credentials; the credential
 * set; the session mode and options. Parsed through the API's own schemas, so both refuse the same input.
 */
import { z } from 'zod';
import { CustomRuntimeSchema } from '../../agents/custom-runtime.ts';
import { customRuntimeProblem } from '../../agents/custom-runtime.ts';
import { CredentialSetField, SessionSettingsSchema, WARM_POOL_MAX, WarmPoolField } from '../../agents/launch-fields.ts';
import type { Agent, CustomRuntime, SessionSettings } from '../../store/conversation-schema.ts';
import { Field } from '../layout.tsx';

export interface LaunchValues {
  custom_command: string;
  custom_install: string;
  custom_env: string;
  custom_credentials: string;
  credential_set: string;
  session_mode: string;
  session_options: string;
  warm_pool: string;
}

export type LaunchErrors = Partial<
  Record<'custom_runtime' | 'credential_set' | 'session_settings' | 'warm_pool', string>
>;

const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

export const launchFromAgent = (a: Agent | undefined): LaunchValues => {
  const c = a?.customRuntime ?? null;
  const install = c?.install ? ('npm' in c.install ? `npm:${c.install.npm}` : `apt:${c.install.apt}`) : '';
  return {
    custom_command: c?.command.join(' ') ?? '',
    custom_install: install,
    custom_env: Object.entries(c?.env ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join('\n'),
    custom_credentials: (c?.credentials ?? [])
      .map((k) => [k.provider, k.env, k.base_url_env ?? ''].join(' ').trim())
      .join('\n'),
    credential_set: a?.credentialSet ?? 'default',
    session_mode: a?.sessionSettings.mode ?? '',
    session_options: Object.entries(a?.sessionSettings.options ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join('\n'),
    warm_pool: String(a?.warmPool ?? 0),
  };
};

export const launchValuesOf = (str: (k: string) => string): LaunchValues => ({
  custom_command: str('custom_command').trim(),
  custom_install: str('custom_install').trim(),
  custom_env: str('custom_env'),
  custom_credentials: str('custom_credentials'),
  credential_set: str('credential_set').trim() || 'default',
  session_mode: str('session_mode').trim(),
  session_options: str('session_options'),
  warm_pool: str('warm_pool').trim() || '0',
});

const pairs = (text: string): Record<string, string> | string => {
  const out: Record<string, string> = {};
  for (const l of lines(text)) {
    const i = l.indexOf('=');
    if (i < 1) return `"${l}" is not NAME=value`;
    out[l.slice(0, i).trim()] = l.slice(i + 1).trim();
  }
  return out;
};

const firstIssue = (e: z.ZodError) => {
  const i = e.issues[0];
  return i ? `${i.path.length > 0 ? `${i.path.join('.')}: ` : ''}${i.message}` : 'invalid';
};

/** The launch fields as agent fields, or the errors to show beside them. */
export function parseLaunch(
  v: LaunchValues,
  runtime: string,
  delivery: 'gateway' | 'direct',
):
  | {
      ok: true;
      customRuntime: CustomRuntime | null;
      credentialSet: string;
      sessionSettings: SessionSettings;
      warmPool: number;
    }
  | { ok: false; errors: LaunchErrors } {
  const errors: LaunchErrors = {};
  let customRuntime: CustomRuntime | null = null;
  if (runtime === 'custom') {
    const env = pairs(v.custom_env);
    const install = /^(npm|apt):(.+)$/.exec(v.custom_install);
    const credentials = lines(v.custom_credentials).map((l) => {
      const [provider, envName, baseUrlEnv] = l.split(/\s+/);
      return { provider, env: envName, ...(baseUrlEnv ? { base_url_env: baseUrlEnv } : {}) };
    });
    if (typeof env === 'string') errors.custom_runtime = `Environment: ${env}.`;
    else if (v.custom_install !== '' && !install)
      errors.custom_runtime = 'Install is npm:name@version or apt:name (or empty).';
    else {
      const parsed = CustomRuntimeSchema.safeParse({
        command: v.custom_command.split(/\s+/).filter(Boolean),
        install: install ? { [install[1]!]: install[2]!.trim() } : null,
        env,
        credentials,
      });
      if (!parsed.success) errors.custom_runtime = `${firstIssue(parsed.error)}.`;
      else {
        customRuntime = parsed.data;
        const problem = customRuntimeProblem(parsed.data, delivery);
        if (problem) errors.custom_runtime = `${problem}.`;
      }
    }
  }
  const set = CredentialSetField.safeParse(v.credential_set);
  if (!set.success) errors.credential_set = `${firstIssue(set.error)}.`;
  const options = pairs(v.session_options);
  const settings = SessionSettingsSchema.safeParse({
    ...(typeof options === 'object' && Object.keys(options).length > 0 ? { options } : {}),
    ...(v.session_mode ? { mode: v.session_mode } : {}),
  });
  if (typeof options === 'string') errors.session_settings = `Session options: ${options}.`;
  else if (!settings.success) errors.session_settings = `${firstIssue(settings.error)}.`;
  // The same schema as the API's: a number written in the form, bounded the same way.
  const pool = WarmPoolField.safeParse(/^\d+$/.test(v.warm_pool) ? Number(v.warm_pool) : Number.NaN);
  if (!pool.success) errors.warm_pool = `${firstIssue(pool.error)}.`;
  if (Object.keys(errors).length > 0 || !set.success || !settings.success || !pool.success)
    return { ok: false, errors };
  return {
    ok: true,
    customRuntime,
    credentialSet: set.data,
    sessionSettings: settings.data,
    warmPool: pool.data,
  };
}

/** The fields, after the runtime's: the custom launch (used only by runtime custom), the set, the session. */
export function LaunchFieldset(p: { values: LaunchValues; errors: LaunchErrors }) {
  const v = p.values;
  const e = p.errors;
  return (
    <>
      <fieldset>
        <legend>Custom runtime (runtime custom: any agent that speaks ACP on stdio)</legend>
        <Field
          id="custom_command"
          label="Command"
          error={e.custom_runtime}
          hint="The argv that starts the agent, arguments separated by spaces, e.g. my-agent --acp."
        >
          <input id="custom_command" name="custom_command" type="text" value={v.custom_command} />
        </Field>
        <Field id="custom_install" label="Install first (optional)" hint="npm:name@version or apt:name">
          <input id="custom_install" name="custom_install" type="text" value={v.custom_install} />
        </Field>
        <Field
          id="custom_env"
          label="Environment variables"
          hint="One NAME=value a line (never a key: see credentials)."
        >
          <textarea id="custom_env" name="custom_env" rows={2}>
            {v.custom_env}
          </textarea>
        </Field>
        <Field
          id="custom_credentials"
          label="Credentials it gets"
          hint="One a line: credential ENV_NAME [BASE_URL_ENV_NAME], e.g. anthropic_api_key ANTHROPIC_API_KEY ANTHROPIC_BASE_URL. Under gateway delivery the base URL variable is required."
        >
          <textarea id="custom_credentials" name="custom_credentials" rows={2}>
            {v.custom_credentials}
          </textarea>
        </Field>
      </fieldset>
      <Field
        id="credential_set"
        label="Credential set"
        error={e.credential_set}
        hint="Which of your named credential sets (Model credentials page) its model key comes from."
      >
        <input id="credential_set" name="credential_set" type="text" value={v.credential_set} maxlength={40} />
      </Field>
      <Field
        id="warm_pool"
        label="Warm pool"
        error={e.warm_pool}
        hint={`Sandboxes kept ready for its next conversations, so the first answer needs no provisioning (0 to ${WARM_POOL_MAX}; they count toward your sandbox limit).`}
      >
        <input id="warm_pool" name="warm_pool" type="number" min={0} max={WARM_POOL_MAX} value={v.warm_pool} />
      </Field>
      <fieldset>
        <legend>Session settings</legend>
        <Field
          id="session_mode"
          label="Session mode (optional)"
          error={e.session_settings}
          hint="An ACP mode the runtime lists, e.g. plan for Claude Code; one it does not list is refused in the conversation."
        >
          <input id="session_mode" name="session_mode" type="text" value={v.session_mode} maxlength={100} />
        </Field>
        <Field
          id="session_options"
          label="Session options (optional)"
          hint="One option=value a line, e.g. effort=high."
        >
          <textarea id="session_options" name="session_options" rows={2}>
            {v.session_options}
          </textarea>
        </Field>
      </fieldset>
    </>
  );
}
