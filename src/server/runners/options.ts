/**
 * The account's runners as a choice for a person (the agent form's runner select): name, id and
 * whether each is connected to some node now, most recently connected first.
 */
import type { RunnerHost } from '../../providers/runner/index.ts';
import { isUuid } from '../http/ids.ts';
import { findRunner, findRunnerByName, listRunners } from './store.ts';
import type { Db } from '../store/db.ts';

export interface RunnerOption {
  readonly id: string;
  readonly name: string;
  readonly online: boolean;
}

export async function runnerOptions(db: Db, host: RunnerHost | null, accountId: string): Promise<RunnerOption[]> {
  const rows = await listRunners(db, accountId);
  return rows.map((r) => ({ id: r.id, name: r.name, online: host?.whereis(r.id) !== undefined }));
}

/** A runner named by its id or by its name, as an agent's pin may name it; undefined when the account has none such. */
export async function findRunnerByRef(
  db: Db,
  accountId: string,
  ref: string,
): Promise<{ id: string; name: string } | undefined> {
  const byId = isUuid(ref) ? await findRunner(db, accountId, ref) : undefined;
  return byId ?? (await findRunnerByName(db, accountId, ref));
}
