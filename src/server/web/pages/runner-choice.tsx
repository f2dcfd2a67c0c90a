/**
 * The agent form's runner choice: "any runner" (the account's most recently connected online runner)
 * or one of the account's runners by name, which new conversations then go to and wait for.
 */
import type { RunnerHost } from '../../../providers/runner/index.ts';
import { listRunners } from '../../runners/store.ts';
import type { Db } from '../../store/db.ts';
import { ErrorNote } from '../layout.tsx';

export interface RunnerOption {
  readonly id: string;
  readonly name: string;
  readonly online: boolean;
}

export const RUNNER_GONE = 'That runner does not exist (any more).';

/** The account's runners for the select, most recently connected first. */
export async function runnerOptions(db: Db, host: RunnerHost | null, accountId: string): Promise<RunnerOption[]> {
  const rows = await listRunners(db, accountId);
  return rows.map((r) => ({ id: r.id, name: r.name, online: host?.whereis(r.id) !== undefined }));
}

export function RunnerChoice(p: { runners: readonly RunnerOption[]; selected: string | null; error?: string | undefined }) {
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
        Where its conversations run when the sandbox provider is runner. A chosen runner is the only one used: while it is offline, new conversations are refused.{' '}
        <a href="/runners">Manage runners</a>.
      </p>
      <ErrorNote id="runner_id_error" message={p.error} />
    </div>
  );
}

/** The runner the form chose: '' is any; an id must be one of the account's. */
export function chosenRunner(body: Record<string, unknown>, runners: readonly RunnerOption[]): { ok: true; id: string | null } | { ok: false; error: string } {
  const v = typeof body.runner_id === 'string' ? body.runner_id : '';
  if (v === '') return { ok: true, id: null };
  return runners.some((r) => r.id === v) ? { ok: true, id: v } : { ok: false, error: RUNNER_GONE };
}
