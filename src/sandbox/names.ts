/**
 * Sandbox name minting and parsing. Fountain always mints names: hosted sandboxes are
 * `fountain-<8 of account id>-<8 hex>`; runner sandboxes carry their runner's id so a name routes.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Result } from './result.ts';
import { err, ok } from './result.ts';

const SUFFIX = /^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/;
const RUNNER_NAME = /^runner-([0-9a-f]{32})-([0-9a-f]{8})$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export type NameError = 'invalid_sprite_name' | 'not_a_runner_sandbox_name' | 'invalid_runner_id';

/** `fountain-<prefix8>-<hex8>`, or `fountain-<prefix8>-<suffix>` when the caller overrides the suffix. */
export function mintHostedName(accountId: string, override?: string | null): Result<string, NameError> {
  const prefix = `fountain-${accountId.replace(/-/g, '').slice(0, 8)}-`;
  if (override === undefined || override === null || override === '') {
    return ok(prefix + randomUUID().replace(/-/g, '').slice(0, 8));
  }
  const suffix = override.startsWith(prefix) ? override.slice(prefix.length) : override;
  if (!SUFFIX.test(suffix)) return err('invalid_sprite_name');
  return ok(prefix + suffix);
}

/** `runner-<runner uuid without dashes>-<8 lowercase hex>`: 48 characters. */
export function mintRunnerName(runnerId: string): Result<string, NameError> {
  if (!UUID.test(runnerId)) return err('invalid_runner_id');
  return ok(`runner-${runnerId.replace(/-/g, '').toLowerCase()}-${randomBytes(4).toString('hex')}`);
}

/** The dashed runner UUID a runner sandbox name routes to. */
export function parseRunnerName(name: string): Result<string, NameError> {
  const m = RUNNER_NAME.exec(name);
  if (!m || !m[1]) return err('not_a_runner_sandbox_name');
  const h = m[1];
  return ok(`${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`);
}
