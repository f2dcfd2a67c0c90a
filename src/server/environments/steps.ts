/**
 * The provisioning steps (skills, runtime configuration, packages, network, clone, setup),
 * run through the SandboxAdapter only, each reported as a stage event `started/done/failed` with a
 * reason in words. Secret values and clone tokens are scrubbed from every output before it is shown.
 */
import type { EnvPairs, Handle, SandboxAdapter } from '../../sandbox/index.ts';
import { describeError, fail, SANDBOX_HOME } from '../../sandbox/index.ts';
import type { Repository, Skill } from '../store/environment-schema.ts';
import { GIT_IDENTITY, stepIsEmpty, type LaunchPlan, type PlannedStep, type StepName } from './plan.ts';

export type StageSink = (
  stage: StepName,
  state: 'started' | 'done' | 'failed',
  data: Record<string, unknown>,
  durationMs?: number,
) => void;

export interface StepTimeouts {
  readonly packagesMs: number;
  readonly cloneMs: number;
  readonly setupMs: number;
  readonly skillsMs: number;
}

export const STEP_TIMEOUTS: StepTimeouts = {
  packagesMs: 300_000,
  cloneMs: 600_000,
  setupMs: 120_000,
  skillsMs: 300_000,
};

export interface StepRunOptions {
  readonly adapter: SandboxAdapter;
  readonly handle: Handle;
  readonly plan: LaunchPlan;
  readonly stage: StageSink;
  readonly timeouts: StepTimeouts;
  /** Where GitHub-sourced skills are cloned from: `<base>/<owner>/<repo>.git` (https://github.com by default). */
  readonly skillsGitBaseUrl: string;
  /** Step hashes recorded the last time (a woken sandbox); null for a fresh one: every step runs. */
  readonly previous: Readonly<Record<string, string>> | null;
}

export type StepsResult =
  | { ok: true; hashes: Record<string, string>; ran: StepName[] }
  | { ok: false; step: StepName; reason: string; hashes: Record<string, string> };

type StepOutcome =
  | { ok: true; data?: Record<string, unknown> }
  | { ok: false; reason: string; data?: Record<string, unknown> };

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const encoder = new TextEncoder();

/** Replaces every secret value (and the clone tokens' encoded forms) in `text` with `[secret]`. */
export function scrubber(secrets: readonly string[]): (text: string) => string {
  const needles = [...new Set(secrets.filter((s) => s.length >= 3))].sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const n of needles) out = out.split(n).join('[secret]');
    return out;
  };
}

const tail = (text: string, max = 600): string => {
  const t = text.trim();
  return t.length > max ? `…${t.slice(-max)}` : t;
};

/** The Authorization header git sends for a clone token (never in argv or a URL: process listings show those). */
const basicAuth = (token: string): string => `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;

const gitAuthEnv = (token: string | undefined): Array<[string, string]> =>
  token
    ? [
        ['GIT_CONFIG_COUNT', '1'],
        ['GIT_CONFIG_KEY_0', 'http.extraHeader'],
        ['GIT_CONFIG_VALUE_0', `Authorization: ${basicAuth(token)}`],
      ]
    : [];

/** Whether `host` is covered by a limited environment's allowed_hosts (exact, or strictly below `*.x`). */
export function hostAllowed(hosts: readonly string[], host: string): boolean {
  const h = host.toLowerCase();
  return hosts.some((e) => (e.startsWith('*.') ? h.endsWith(e.slice(1)) : e === h));
}

/** The exact package commands (sudo only when not already root and sudo exists). */
export function packageCommands(p: { readonly apt: readonly string[]; readonly npm: readonly string[] }): string[] {
  const cmds: string[] = [];
  if (p.apt.length > 0) {
    cmds.push(
      'SUDO=; if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; ' +
        `$SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${p.apt.map(q).join(' ')}`,
    );
  }
  if (p.npm.length > 0) cmds.push(`npm install -g --no-progress --silent ${p.npm.map(q).join(' ')}`);
  return cmds;
}

const CLONE_SCRIPT = [
  'set -e',
  'url="$1"; dir="$2"; ref="$3"',
  'if [ -d "$dir/.git" ]; then',
  '  if [ -n "$ref" ]; then git -C "$dir" fetch -q --depth 50 origin "$ref"; else git -C "$dir" fetch -q --depth 50 origin; fi',
  '  git -C "$dir" checkout -q FETCH_HEAD',
  'else',
  '  mkdir -p "$(dirname "$dir")"',
  '  if [ -n "$ref" ]; then git clone -q --depth 50 -b "$ref" -- "$url" "$dir"; else git clone -q --depth 50 -- "$url" "$dir"; fi',
  'fi',
].join('\n');

const GITHUB_SKILL_SCRIPT = [
  'set -e',
  'root="$1"; url="$2"; ref="$3"; name="$4"',
  'tmp="$(mktemp -d)"',
  'trap \'rm -rf "$tmp"\' EXIT',
  'if [ -n "$ref" ]; then git clone -q --depth 1 -b "$ref" -- "$url" "$tmp/src"; else git clone -q --depth 1 -- "$url" "$tmp/src"; fi',
  'mkdir -p "$root"',
  'found=0',
  'for f in $(cd "$tmp/src" && find . -name SKILL.md -not -path "./.git/*" | sort); do',
  '  d="$(dirname "$f")"; n="$(basename "$d")"',
  '  if [ "$d" = . ]; then n="$(basename "$url" .git)"; fi',
  '  if [ -n "$name" ] && [ "$n" != "$name" ]; then continue; fi',
  '  rm -rf "$root/$n"; cp -R "$tmp/src/$d" "$root/$n"; rm -rf "$root/$n/.git"; found=$((found+1))',
  'done',
  'if [ "$found" -eq 0 ]; then echo "no SKILL.md${name:+ for skill $name} in the repository" >&2; exit 3; fi',
  'echo "$found"',
].join('\n');

/** Key in a sandbox's recorded step hashes: a limited policy was applied to it (and nothing can lift it). */
const POLICY_APPLIED = 'network:applied';
const POLICY_STAYS =
  "the environment is unrestricted now, but this sandbox's limited network policy stays applied until the conversation gets a new sandbox: the sandbox contract can narrow egress, not lift a policy";

export async function runSteps(o: StepRunOptions): Promise<StepsResult> {
  const secrets = o.plan.secrets.reveal();
  const secretMap = new Map(secrets);
  const scrub = scrubber([
    ...secrets.map(([, v]) => v),
    ...secrets.map(([, v]) => basicAuth(v)),
    ...secrets.map(([, v]) => Buffer.from(`x-access-token:${v}`).toString('base64')),
  ]);
  const env: EnvPairs = [...GIT_IDENTITY, ['GIT_TERMINAL_PROMPT', '0'], ...o.plan.env, ...secrets];
  const hashes: Record<string, string> = { ...(o.previous ?? {}) };
  const ran: StepName[] = [];
  const reapply = o.previous !== null;

  const sh = async (
    script: string,
    args: readonly string[],
    timeoutMs: number,
    extraEnv: EnvPairs = [],
  ): Promise<{ ok: true; exitCode: number; output: string } | { ok: false; reason: string }> => {
    // A fresh sandbox may not have its home yet (nothing was written there): made here rather than asked of `dir`.
    const inHome = `mkdir -p ${SANDBOX_HOME} 2>/dev/null; cd ${SANDBOX_HOME} 2>/dev/null || true\n${script}`;
    const r = await o.adapter.processes.exec(o.handle, 'sh', ['-c', inHome, 'sh', ...args], {
      env: [...env, ...extraEnv],
      timeoutMs,
      stderrToStdout: true,
    });
    if (!r.ok) return { ok: false, reason: scrub(describeError(r.error)) };
    return { ok: true, exitCode: r.value.exitCode, output: scrub(Buffer.from(r.value.output).toString('utf8')) };
  };

  const steps: Record<StepName, (s: PlannedStep) => Promise<StepOutcome>> = {
    skills: async (s) => {
      if (s.name !== 'skills') throw new Error('unreachable');
      for (const skill of s.skills) {
        const r = await installSkill(skill, s.root);
        if (!r.ok) return r;
      }
      return { ok: true, data: { count: s.skills.length } };
    },
    configuration: async (s) => {
      if (s.name !== 'configuration') throw new Error('unreachable');
      for (const f of s.files) {
        const w = await o.adapter.files.writeFile(o.handle, f.path, encoder.encode(f.content), { mode: 0o600 });
        if (!w.ok) return { ok: false, reason: `writing ${f.path} failed: ${scrub(describeError(w.error))}` };
      }
      return { ok: true, data: { files: s.files.map((f) => f.path) } };
    },
    packages: async (s) => {
      if (s.name !== 'packages') throw new Error('unreachable');
      const commands = packageCommands(s.packages);
      for (const cmd of commands) {
        const r = await sh(cmd, [], o.timeouts.packagesMs);
        const which = cmd.includes('apt-get')
          ? `apt-get install ${s.packages.apt.join(' ')}`
          : `npm install -g ${s.packages.npm.join(' ')}`;
        if (!r.ok) return { ok: false, reason: `${which} failed: ${r.reason}` };
        if (r.exitCode !== 0)
          return {
            ok: false,
            reason: `${which} exited ${r.exitCode}: ${tail(r.output)}`,
            data: { exit_code: r.exitCode },
          };
      }
      return { ok: true, data: { commands: commands.length } };
    },
    network: async (s) => {
      if (s.name !== 'network') throw new Error('unreachable');
      const r = o.adapter.network
        ? await o.adapter.network.applyNetworkPolicy(o.handle, { allow: [...s.hosts] })
        : fail('not_supported', 'network_policy');
      if (!r.ok) {
        const reason =
          r.error.code === 'not_supported'
            ? 'backend_lacks_network_policy'
            : `applying the network policy failed: ${describeError(r.error)}`;
        return { ok: false, reason, data: { type: 'limited', provider: o.adapter.provider } };
      }
      return { ok: true, data: { type: 'limited', hosts: [...s.hosts] } };
    },
    clone: async (s) => {
      if (s.name !== 'clone') throw new Error('unreachable');
      const limited = o.plan.steps.find((p) => p.name === 'network');
      for (const repo of s.repositories) {
        const host = new URL(repo.url).hostname;
        if (limited?.name === 'network' && limited.type === 'limited' && !hostAllowed(limited.hosts, host)) {
          return {
            ok: false,
            reason: `the environment's network is limited and does not allow ${host}: add it to networking_config.allowed_hosts to clone ${repo.url}`,
          };
        }
        const r = await cloneOne(repo);
        if (!r.ok) return r;
      }
      return { ok: true, data: { count: s.repositories.length } };
    },
    setup: async (s) => {
      if (s.name !== 'setup') throw new Error('unreachable');
      const r = await sh(s.script, [], o.timeouts.setupMs);
      if (!r.ok) return { ok: false, reason: `the setup script did not finish: ${r.reason}` };
      if (r.exitCode !== 0)
        return {
          ok: false,
          reason: `the setup script exited ${r.exitCode}: ${tail(r.output)}`,
          data: { exit_code: r.exitCode },
        };
      return { ok: true, data: { exit_code: 0 } };
    },
  };

  const cloneOne = async (repo: Repository): Promise<StepOutcome> => {
    const token = repo.secret_key ? secretMap.get(repo.secret_key) : undefined;
    const r = await sh(
      CLONE_SCRIPT,
      [repo.url, repo.mount_path, repo.ref ?? ''],
      o.timeouts.cloneMs,
      gitAuthEnv(token),
    );
    if (!r.ok) return { ok: false, reason: `cloning ${repo.url} failed: ${r.reason}` };
    if (r.exitCode !== 0)
      return {
        ok: false,
        reason: `cloning ${repo.url} into ${repo.mount_path} exited ${r.exitCode}: ${tail(r.output)}`,
      };
    return { ok: true };
  };

  const installSkill = async (skill: Skill, root: string): Promise<StepOutcome> => {
    if ('content' in skill) {
      const path = `${root}/${skill.name}/SKILL.md`;
      const w = await o.adapter.files.writeFile(o.handle, path, encoder.encode(skill.content));
      return w.ok
        ? { ok: true }
        : { ok: false, reason: `writing skill ${skill.name} failed: ${describeError(w.error)}` };
    }
    const url = `${o.skillsGitBaseUrl.replace(/\/+$/, '')}/${skill.source}.git`;
    const r = await sh(GITHUB_SKILL_SCRIPT, [root, url, skill.ref ?? '', skill.name ?? ''], o.timeouts.skillsMs);
    const label = `skill ${skill.source}${skill.ref ? `@${skill.ref}` : ''}${skill.name ? ` (${skill.name})` : ''}`;
    if (!r.ok) return { ok: false, reason: `installing ${label} failed: ${r.reason}` };
    if (r.exitCode !== 0) return { ok: false, reason: `installing ${label} exited ${r.exitCode}: ${tail(r.output)}` };
    return { ok: true };
  };

  for (const step of o.plan.steps) {
    if (reapply && o.previous![step.name] === step.hash) continue;
    if (stepIsEmpty(step)) {
      hashes[step.name] = step.hash;
      if (reapply && step.name === 'network' && o.previous![POLICY_APPLIED]) {
        // The contract's apply_network_policy takes an allow list and denies the rest: it can narrow
        // egress but has no way to lift a policy. Said rather than skipped silently; the mark stays.
        o.stage('network', 'done', { type: 'unrestricted', lifted: false, reapply: true, reason: POLICY_STAYS });
        ran.push('network');
      }
      continue;
    }
    const t0 = Date.now();
    const extra = reapply ? { reapply: true } : {};
    o.stage(step.name, 'started', { ...startData(step), ...extra });
    const r = await steps[step.name](step);
    if (!r.ok) {
      o.stage(step.name, 'failed', { ...(r.data ?? {}), reason: r.reason, ...extra }, Date.now() - t0);
      return { ok: false, step: step.name, reason: `${step.name}: ${r.reason}`, hashes };
    }
    o.stage(step.name, 'done', { ...(r.data ?? {}), ...extra }, Date.now() - t0);
    hashes[step.name] = step.hash;
    if (step.name === 'network') hashes[POLICY_APPLIED] = '1';
    ran.push(step.name);
  }
  return { ok: true, hashes, ran };
}

function startData(s: PlannedStep): Record<string, unknown> {
  switch (s.name) {
    case 'skills':
      return { skills: s.skills.map((k) => ('content' in k ? k.name : k.source)) };
    case 'configuration':
      return { files: s.files.map((f) => f.path) };
    case 'packages':
      return { commands: packageCommands(s.packages) };
    case 'network':
      return { type: s.type, hosts: [...s.hosts] };
    case 'clone':
      return { count: s.repositories.length, repositories: s.repositories.map((r) => r.url) };
    case 'setup':
      return {};
  }
}
