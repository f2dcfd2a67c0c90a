/**
 * Ships smoke.sh into a sandbox as one base64 line through an adapter's own `exec`, and reads
 * the verdict marker (not the exit code, which some provider exec APIs swallow).
 */
import { readFileSync } from 'node:fs';
import type { EnvPairs, Handle, SandboxAdapter, SandboxError } from '../../src/sandbox/index.ts';

export const SMOKE_SCRIPT = new URL('./smoke.sh', import.meta.url);

export type SmokeVerdict =
  | { readonly kind: 'ok' }
  | { readonly kind: 'failed'; readonly count: number; readonly failed: readonly string[] }
  /** No marker: the script did not run to its end (or the provider lost its output). */
  | { readonly kind: 'none' };

export interface SmokeRun {
  readonly output: string;
  readonly exitCode: number;
  readonly verdict: SmokeVerdict;
  /** Each check's line: name → ok or FAIL and its detail. */
  readonly checks: ReadonlyMap<string, { readonly ok: boolean; readonly detail: string }>;
}

export function parseSmokeOutput(output: string): Pick<SmokeRun, 'verdict' | 'checks'> {
  const checks = new Map<string, { ok: boolean; detail: string }>();
  let verdict: SmokeVerdict = { kind: 'none' };
  for (const line of output.split('\n')) {
    const c = /^(ok|FAIL) ([a-z0-9-]+): (.*)$/.exec(line);
    if (c) checks.set(c[2]!, { ok: c[1] === 'ok', detail: c[3]! });
    if (line === 'FOUNTAIN_IMAGE_SMOKE_OK') verdict = { kind: 'ok' };
    const f = /^FOUNTAIN_IMAGE_SMOKE_FAILED (\d+)(?: \(([^)]*)\))?$/.exec(line);
    if (f) verdict = { kind: 'failed', count: Number(f[1]), failed: f[2] ? f[2].split(' ') : [] };
  }
  return { verdict, checks };
}

/** The command that carries the script: decoded into a file under $HOME, then run by bash. */
export function smokeCommand(script = readFileSync(SMOKE_SCRIPT)): { cmd: string; args: string[] } {
  const b64 = script.toString('base64');
  return {
    cmd: 'bash',
    args: [
      '-c',
      `f="$HOME/.fountain-image-smoke.sh" && printf %s '${b64}' | base64 -d > "$f" && bash "$f"; s=$?; rm -f "$f"; exit $s`,
    ],
  };
}

export async function runImageSmoke(
  adapter: SandboxAdapter,
  handle: Handle,
  opts: { readonly env?: EnvPairs; readonly timeoutMs?: number } = {},
): Promise<{ ok: true; value: SmokeRun } | { ok: false; error: SandboxError }> {
  const { cmd, args } = smokeCommand();
  const r = await adapter.processes.exec(handle, cmd, args, {
    stderrToStdout: true,
    timeoutMs: opts.timeoutMs ?? 900_000,
    ...(opts.env ? { env: opts.env } : {}),
  });
  if (!r.ok) return r;
  const output = Buffer.from(r.value.output).toString('utf8');
  return { ok: true, value: { output, exitCode: r.value.exitCode, ...parseSmokeOutput(output) } };
}
