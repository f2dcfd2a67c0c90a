/**
 * What a launch is provisioned with, worked out before any sandbox exists: the process env (variables,
 * then secrets), the MCP delivery, and the provisioning steps in order (docs/environments.md), each with a hash of
 * its input so a woken sandbox redoes only the steps whose input changed.
 */
import type { McpServer as AcpMcpServer } from '@agentclientprotocol/sdk';
import { createHash } from 'node:crypto';
import { Private } from '../../sandbox/private.ts';
import type { RuntimeSpec } from '../runtimes/table.ts';
import type { Agent } from '../store/conversation-schema.ts';
import type { Environment, Packages, Repository, Skill } from '../store/environment-schema.ts';
import { deliverMcp, type ConfigFile } from './mcp.ts';
import type { LaunchEnvironment } from './service.ts';

export const STEP_NAMES = ['skills', 'configuration', 'packages', 'network', 'clone', 'setup'] as const;
export type StepName = (typeof STEP_NAMES)[number];

export type PlannedStep =
  | { readonly name: 'skills'; readonly hash: string; readonly skills: readonly Skill[]; readonly root: string }
  | { readonly name: 'configuration'; readonly hash: string; readonly files: readonly ConfigFile[] }
  | { readonly name: 'packages'; readonly hash: string; readonly packages: Packages }
  | {
      readonly name: 'network';
      readonly hash: string;
      readonly type: Environment['networkingType'];
      readonly hosts: readonly string[];
    }
  | { readonly name: 'clone'; readonly hash: string; readonly repositories: readonly Repository[] }
  | { readonly name: 'setup'; readonly hash: string; readonly script: string };

export interface LaunchPlan {
  readonly environmentId: string | null;
  /** The environment's variables (not secret): `.env`, the steps' commands and the agent's process env. */
  readonly env: ReadonlyArray<readonly [string, string]>;
  /** Merged secrets (launch-attached win): the steps' commands and the agent's process env only. */
  readonly secrets: Private<ReadonlyArray<readonly [string, string]>>;
  readonly mcpSession: readonly AcpMcpServer[];
  readonly steps: readonly PlannedStep[];
  /** True when the environment is `limited`: the launch needs a backend with network_policy. */
  readonly limited: boolean;
}

export type PlanResult = { ok: true; value: LaunchPlan } | { ok: false; step: StepName; reason: string };

/** Commit identity in the sandbox. */
export const GIT_IDENTITY: ReadonlyArray<readonly [string, string]> = [
  ['GIT_AUTHOR_NAME', 'AoD'],
  ['GIT_AUTHOR_EMAIL', 'aod@local'],
  ['GIT_COMMITTER_NAME', 'AoD'],
  ['GIT_COMMITTER_EMAIL', 'aod@local'],
];

const hashOf = (v: unknown): string => createHash('sha256').update(JSON.stringify(v)).digest('hex').slice(0, 32);

export function planLaunch(
  spec: RuntimeSpec,
  agent: Pick<Agent, 'skills' | 'mcpServers'>,
  launch: LaunchEnvironment,
  branch: { readonly url: string; readonly branch: string } | null = null,
): PlanResult {
  const e = launch.environment;
  const secrets = launch.secrets.reveal();
  const envVars = Object.entries(e?.envVars ?? {}).filter(([k]) => !secrets.has(k));
  const vars = new Map<string, string>([...envVars, ...secrets]);
  const mcp = deliverMcp(spec, agent.mcpServers, vars, new Set(secrets.keys()));
  if (!mcp.ok)
    return {
      ok: false,
      step: 'configuration',
      reason: `${mcp.where} uses \${${mcp.missing}}, which is neither a variable nor a secret of the environment`,
    };
  for (const r of e?.repositories ?? []) {
    if (r.secret_key && !secrets.has(r.secret_key))
      return {
        ok: false,
        step: 'clone',
        reason: `repository ${r.url} names secret ${r.secret_key}, which the environment does not have`,
      };
  }
  const packages = e?.packages ?? { apt: [], npm: [] };
  const hosts = e?.allowedHosts ?? [];
  // A branch picked for the conversation replaces that repository's ref (and so the clone step's hash).
  const repositories = (e?.repositories ?? []).map((r) =>
    branch && r.url === branch.url ? { ...r, ref: branch.branch } : r,
  );
  const script = e?.setupScript ?? '';
  const skillsRoot = `${spec.home}/${spec.configDir}/skills`;
  const steps: PlannedStep[] = [
    { name: 'skills', hash: hashOf([skillsRoot, agent.skills]), skills: agent.skills, root: skillsRoot },
    { name: 'configuration', hash: hashOf(mcp.value.files), files: mcp.value.files },
    { name: 'packages', hash: hashOf(packages), packages },
    {
      name: 'network',
      hash: hashOf([e?.networkingType ?? 'unrestricted', hosts]),
      type: e?.networkingType ?? 'unrestricted',
      hosts,
    },
    // The token's value is not part of the hash: a hash must not tell a secret, and a rotated token needs no re-clone.
    { name: 'clone', hash: hashOf(repositories), repositories },
    { name: 'setup', hash: hashOf(script), script },
  ];
  return {
    ok: true,
    value: {
      environmentId: e?.id ?? null,
      env: envVars,
      secrets: new Private([...secrets.entries()]),
      mcpSession: mcp.value.session,
      steps,
      limited: e?.networkingType === 'limited',
    },
  };
}

/** Whether a step has anything to do; an empty step runs silently (its hash is still recorded). */
export function stepIsEmpty(s: PlannedStep): boolean {
  switch (s.name) {
    case 'skills':
      return s.skills.length === 0;
    case 'configuration':
      return s.files.length === 0;
    case 'packages':
      return s.packages.apt.length === 0 && s.packages.npm.length === 0;
    case 'network':
      return s.type === 'unrestricted';
    case 'clone':
      return s.repositories.length === 0;
    case 'setup':
      return s.script.trim() === '';
  }
}
