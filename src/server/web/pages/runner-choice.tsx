/**
 * The agent form's runner choice: "any runner" (the account's most recently connected online runner)
 * or one of the account's runners by name, which new conversations then go to and wait for.
 */
import type { RunnerOption } from '../../runners/options.ts';
import { ErrorNote } from '../layout.tsx';

export { runnerOptions, type RunnerOption } from '../../runners/options.ts';

export const RUNNER_GONE = 'That runner does not exist (any more).';

export function RunnerChoice(p: {
  runners: readonly RunnerOption[];
  selected: string | null;
  error?: string | undefined;
}) {
  // The pin as it stands: a person saving the form should know its runner is away before they rely on it.
  const away = p.runners.find((r) => r.id === p.selected && !r.online);
  return (
    <div class="field">
      <label for="runner_id">Runner</label>
      <select id="runner_id" name="runner_id" aria-describedby="runner_id_hint">
        <option value="" selected={p.selected === null}>
          Any runner (the most recently connected one online)
        </option>
        {p.runners.map((r) => (
          <option value={r.id} selected={p.selected === r.id}>
            {r.name} ({r.online ? 'online' : 'offline'})
          </option>
        ))}
      </select>
      <p class="muted small" id="runner_id_hint">
        Where its conversations run when the sandbox provider is runner. A chosen runner is the only one used: while it
        is offline, new conversations are refused. <a href="/account/runners">Manage runners</a>.
      </p>
      {away ? (
        <p class="notice" id="runner_id_offline">
          Runner {JSON.stringify(away.name)} is offline: new conversations with this agent are refused until it
          reconnects.
        </p>
      ) : null}
      <ErrorNote id="runner_id_error" message={p.error} />
    </div>
  );
}

/** The runner the form chose: '' is any; an id must be one of the account's. */
export function chosenRunner(
  body: Record<string, unknown>,
  runners: readonly RunnerOption[],
): { ok: true; id: string | null } | { ok: false; error: string } {
  const v = typeof body.runner_id === 'string' ? body.runner_id : '';
  if (v === '') return { ok: true, id: null };
  return runners.some((r) => r.id === v) ? { ok: true, id: v } : { ok: false, error: RUNNER_GONE };
}
