/**
 * The CLI's credentials file (~/.fountain/credentials, mode 0600) and profile resolution:
 * --profile, then FOUNTAIN_PROFILE, then `default`; FOUNTAIN_API_KEY and FOUNTAIN_BASE_URL override.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { z } from 'zod';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:4000';

const profileSchema = z.object({
  base_url: z.url({ protocol: /^https?$/ }).optional(),
  api_key: z
    .string()
    .regex(/^ftn_[0-9a-f]{64}$/, 'api_key must be ftn_ followed by 64 hex digits')
    .optional(),
});
export type Profile = z.infer<typeof profileSchema>;

/** FOUNTAIN_HOME, else ~/.fountain; an empty FOUNTAIN_HOME counts as unset so nothing lands in the working directory. */
export const fountainHome = (): string => process.env.FOUNTAIN_HOME?.trim() || join(homedir(), '.fountain');

export const credentialsPath = (home = fountainHome()): string => join(home, 'credentials');

export class CredentialsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CredentialsError';
  }
}

/** Parses the INI-style file: `[profile]` sections of `key = value` lines. */
export function parseCredentials(text: string, source: string): Record<string, Profile> {
  const profiles: Record<string, Record<string, string>> = {};
  let current: Record<string, string> | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    const section = /^\[([A-Za-z0-9_.-]+)\]$/.exec(line);
    if (section) {
      current = profiles[section[1]!] ??= {};
      return;
    }
    const kv = /^([a-z_]+)\s*=\s*(.*)$/.exec(line);
    if (!kv || !current) throw new CredentialsError(`${source}:${i + 1}: expected [profile] or key = value`);
    // Values are written double-quoted; unquoted values from hand edits are accepted too.
    const value = kv[2]!.trim();
    current[kv[1]!] = /^"(.*)"$/.test(value) ? JSON.parse(value) : value;
  });
  const out: Record<string, Profile> = {};
  for (const [name, raw] of Object.entries(profiles)) {
    const parsed = profileSchema.safeParse(raw);
    if (!parsed.success) {
      throw new CredentialsError(`${source}: profile [${name}]: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
    }
    out[name] = parsed.data;
  }
  return out;
}

export function readCredentials(path = credentialsPath()): Record<string, Profile> {
  if (!existsSync(path)) return {};
  return parseCredentials(readFileSync(path, 'utf8'), path);
}

/** Writes one profile, keeping the others; the file is replaced atomically with mode 0600. */
export function saveProfile(profile: string, values: Profile, path = credentialsPath()): void {
  if (!/^[A-Za-z0-9_.-]+$/.test(profile))
    throw new CredentialsError(`profile names are letters, digits, . _ and -, not "${profile}"`);
  const all = readCredentials(path);
  all[profile] = { ...all[profile], ...values };
  // `default` first, then the others sorted, so the file diffs cleanly.
  const names = Object.keys(all).sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a.localeCompare(b)));
  const text = names
    .map((name) => [name, all[name]!] as const)
    .map(([name, p]) => {
      const lines = Object.entries(p)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${k} = ${JSON.stringify(v)}`);
      return `[${name}]\n${lines.join('\n')}\n`;
    })
    .join('\n');
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export interface ResolvedCredentials {
  profile: string;
  baseUrl: string;
  apiKey: string | undefined;
}

export function resolveCredentials(
  opts: { profile?: string | undefined },
  env: Readonly<Record<string, string | undefined>> = process.env,
  path = credentialsPath(),
): ResolvedCredentials {
  const nonBlank = (v: string | undefined) => (v && v.trim() !== '' ? v.trim() : undefined);
  const profile = nonBlank(opts.profile) ?? nonBlank(env.FOUNTAIN_PROFILE) ?? 'default';
  const stored = readCredentials(path)[profile] ?? {};
  return {
    profile,
    baseUrl: (nonBlank(env.FOUNTAIN_BASE_URL) ?? stored.base_url ?? DEFAULT_BASE_URL).replace(/\/+$/, ''),
    apiKey: nonBlank(env.FOUNTAIN_API_KEY) ?? stored.api_key,
  };
}
