/**
 * How the user can run this `fountain` again from where they are, for the commands the CLI suggests:
 * `fountain` when PATH finds this installation, `npx fountain` inside its checkout, else `node <path>`.
 */
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join, relative, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF_BIN = fileURLToPath(new URL('../../bin/fountain.js', import.meta.url));

const real = (p: string): string | null => {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
};

/** A word the shell passes through unchanged, or the word in single quotes. */
const shellWord = (w: string): string => (/^[A-Za-z0-9_./:@%+=-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

export function fountainCommand(
  cwd: string = process.cwd(),
  env: Readonly<Record<string, string | undefined>> = process.env,
  selfBin: string = SELF_BIN,
): string {
  const self = real(selfBin) ?? selfBin;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'fountain');
    if (existsSync(candidate) && real(candidate) === self) return 'fountain';
  }
  // `npx fountain` runs this package's bin only inside its own directory; elsewhere it fetches an unrelated package.
  const root = dirname(dirname(self));
  const rel = relative(root, real(cwd) ?? cwd);
  if (!rel.startsWith('..') && !isAbsolute(rel)) return 'npx fountain';
  return `node ${shellWord(self)}`;
}
