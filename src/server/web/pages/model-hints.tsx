/**
 * The agent form's model help: each runtime's default model and examples (the form's model follows the
 * runtime; app.js swaps them as the runtime changes), and the notice, before anything is saved, that the
 * runtime's model credential is not set, with the link to set it.
 */
import { raw } from 'hono/html';
import { RUNTIMES } from '../../agents/service.ts';
import { RUNTIME_SPECS } from '../../runtimes/table.ts';
import { CREDENTIAL_API, credentialsFor, type CredentialProvider } from '../../credentials/providers.ts';
import type { Runtime } from '../../store/conversation-schema.ts';

/** What app.js needs per runtime: its default and example models, the vendors it takes, the credentials per vendor. */
export interface RuntimeModels {
  readonly default: string;
  readonly examples: readonly string[];
  readonly vendors: readonly string[];
  readonly needs: Readonly<Record<string, readonly CredentialProvider[]>>;
}

export const RUNTIME_MODELS: Readonly<Record<Runtime, RuntimeModels>> = Object.fromEntries(
  RUNTIMES.map((r) => {
    const spec = RUNTIME_SPECS[r];
    const needs = Object.fromEntries(spec.modelProviders.map((v) => [v, credentialsFor(r, `${v}/model`)]));
    return [r, { default: spec.models[0]!, examples: spec.models, vendors: spec.modelProviders, needs }];
  }),
) as Record<Runtime, RuntimeModels>;

/** The model field's hint for a runtime: its examples, or that it needs none. */
export function modelHint(runtime: string): string {
  const m = RUNTIME_MODELS[runtime as Runtime];
  if (!m) return 'provider/model, e.g. anthropic/claude-sonnet-4-5.';
  if (m.vendors.length === 1 && m.vendors[0] === 'fountain') return 'The demo runtime needs no model: fountain/demo.';
  return `provider/model, e.g. ${m.examples.join(', ')}.`;
}

/** The credentials this runtime and model would use, none of which the account has set; empty when fine. */
export function missingCredentials(runtime: string, model: string, set: readonly string[]): CredentialProvider[] {
  const m = RUNTIME_MODELS[runtime as Runtime];
  const needs = m?.needs[model.slice(0, model.indexOf('/'))] ?? [];
  return needs.some((c) => set.includes(c)) ? [] : [...needs];
}

/** The notice itself (rendered by the server first, then kept current by app.js). */
export function CredentialWarning(p: { runtime: string; model: string; set: readonly string[] }) {
  const missing = missingCredentials(p.runtime, p.model, p.set);
  return (
    <p class="notice" id="credential_warning" role="status" hidden={missing.length === 0}>
      <span class="credential-words">
        {missing.length ? `No ${missing.map((c) => CREDENTIAL_API[c].label).join(' or ')} is set: ` : ''}
      </span>
      this agent cannot reach its model until one is. <a href="/account/credentials">Set it on Model credentials</a>.
    </p>
  );
}

/** The table app.js reads, and the credentials the account has (names only, never values). */
export function ModelData(p: { set: readonly string[] }) {
  const labels = Object.fromEntries(Object.entries(CREDENTIAL_API).map(([k, v]) => [k, v.label]));
  const data = JSON.stringify({ runtimes: RUNTIME_MODELS, set: p.set, labels }).replace(/</g, '\\u003c');
  return (
    <script type="application/json" id="runtime-models">
      {raw(data)}
    </script>
  );
}
