/**
 * The installed runner on this machine: `<FOUNTAIN_HOME>/runner/<version>/fountain-runner.mjs`, the
 * `current` link the launcher runs, and updating it from the server's manifest and artifact.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { fountainHome } from './credentials.ts';
import { IS_RUNNER_ARTIFACT, compareRunnerVersions } from './runner-version.ts';

export const ARTIFACT_FILE = 'fountain-runner.mjs';

const versionName = z.string().regex(/^[0-9A-Za-z.+-]{1,80}$/, 'a runner version is 1-80 of 0-9 A-Z a-z . + -');

export const manifestSchema = z.object({
  version: versionName,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  size: z.number().int().positive(),
  url: z.url({ protocol: /^https?$/ }),
});
export type RunnerManifest = z.infer<typeof manifestSchema>;

/** Where versions live; `current` there names the one the launcher starts. */
export const runnerInstallDir = (): string => join(fountainHome(), 'runner');

/** The version directory this process runs from, when it is an installed artifact. */
export function ownVersionDir(): string | null {
  return IS_RUNNER_ARTIFACT ? dirname(fileURLToPath(import.meta.url)) : null;
}

/** The version `current` points at, or null when nothing is installed there. */
export function currentVersion(dir = runnerInstallDir()): string | null {
  try {
    return basename(readlinkSync(join(dir, 'current')));
  } catch {
    return null;
  }
}

export class UpdateError extends Error {}

export async function fetchManifest(baseUrl: string): Promise<RunnerManifest> {
  let res: Response;
  try {
    res = await fetch(`${baseUrl}/runner/manifest.json`, { signal: AbortSignal.timeout(30_000) });
  } catch (e) {
    throw new UpdateError(`cannot reach the Fountain server at ${baseUrl}: ${(e as Error).message}`);
  }
  if (!res.ok) throw new UpdateError(`${baseUrl} does not hand out a runner (HTTP ${res.status} for its manifest)`);
  const parsed = manifestSchema.safeParse(await res.json().catch(() => null));
  if (!parsed.success) throw new UpdateError(`${baseUrl} sent a runner manifest this runner cannot read`);
  return parsed.data;
}

export type UpdatePlan =
  | { readonly kind: 'same' }
  | { readonly kind: 'downgrade_refused'; readonly message: string }
  | { readonly kind: 'install' };

/** Whether to install `offered` over `running`: the same version is left alone, an older one needs force. */
export function planUpdate(running: string, offered: string, force: boolean): UpdatePlan {
  if (running === offered) return { kind: 'same' };
  if (!force && compareRunnerVersions(offered, running) < 0)
    return {
      kind: 'downgrade_refused',
      message: `the server's runner ${offered} is older than this one (${running}); pass --force to downgrade`,
    };
  return { kind: 'install' };
}

/**
 * Downloads the artifact, checks its size and sha256 against the manifest, writes it into a new version
 * directory (built beside it and renamed into place), then points `current` at it with one rename, so a
 * launcher starting at any moment runs either the old version or the new one, whole.
 */
export async function installArtifact(manifest: RunnerManifest, dir = runnerInstallDir()): Promise<string> {
  let res: Response;
  try {
    res = await fetch(manifest.url, { signal: AbortSignal.timeout(300_000) });
  } catch (e) {
    throw new UpdateError(`cannot download the runner from ${manifest.url}: ${(e as Error).message}`);
  }
  if (!res.ok) throw new UpdateError(`downloading the runner failed: HTTP ${res.status} from ${manifest.url}`);
  const bytes = Buffer.from(await res.arrayBuffer());
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (bytes.length !== manifest.size || sha !== manifest.sha256)
    throw new UpdateError(`the downloaded runner does not match the server's checksum (sha256 ${sha})`);
  const target = join(dir, manifest.version);
  const tmp = join(dir, `.tmp-${randomBytes(4).toString('hex')}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    if (!existsSync(join(target, ARTIFACT_FILE))) {
      mkdirSync(tmp, { mode: 0o755 });
      writeFileSync(join(tmp, ARTIFACT_FILE), bytes, { mode: 0o755 });
      rmSync(target, { recursive: true, force: true });
      renameSync(tmp, target);
    }
    const link = join(dir, `.current-${randomBytes(4).toString('hex')}`);
    symlinkSync(manifest.version, link);
    renameSync(link, join(dir, 'current'));
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw new UpdateError(`cannot write to ${dir}: ${(e as Error).message}`);
  }
  return target;
}
