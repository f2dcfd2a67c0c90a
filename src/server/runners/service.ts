/**
 * The account's runner records as a service: what routes and web pages call (they never query the
 * store themselves). The list, deletion, and the name rule a runner registers with.
 */
import type { Db } from '../store/db.ts';
import type { Runner } from '../store/schema.ts';
import * as store from './store.ts';

export { RUNNER_NAME_PATTERN, runnerBackendOf, runnerCapabilitiesOf } from './store.ts';

/** Most recently connected first (never-connected last), then by name. */
export const listRunners = (db: Db, accountId: string): Promise<Runner[]> => store.listRunners(db, accountId);

/** Deletes one of the account's runner records; the row it deleted, or undefined when there was none. */
export const deleteRunner = (db: Db, accountId: string, id: string): Promise<Runner | undefined> =>
  store.deleteRunner(db, accountId, id);
