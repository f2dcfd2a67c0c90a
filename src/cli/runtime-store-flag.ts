/**
 * `--runtime-store <dir>` / `--no-runtime-store` of `fountain runner` and `fountain up`: where a process
 * backend's sandboxes share one install of each agent adapter version, as the backend takes it.
 */
import { resolve } from 'node:path';
import { z } from 'zod';

/** Commander gives the directory, false for `--no-runtime-store`, or true (the default) for neither. */
export const runtimeStoreFlag = z
  .union([z.string().trim().min(1, '--runtime-store needs a directory'), z.boolean()])
  .optional();

/** The backend's option: a directory, null for none, undefined for its default (~/.fountain/runtimes). */
export function runtimeStoreOption(flag: z.infer<typeof runtimeStoreFlag>): string | null | undefined {
  if (typeof flag === 'string') return resolve(flag);
  return flag === false ? null : undefined;
}
