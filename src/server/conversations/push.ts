/**
 * "Push to a branch": the sandbox's commits in an environment repository, pushed by git in the sandbox to a
 * new branch on the remote, with the environment's token given to git for that one command only.
 */
import { describeError, type KnownProvider } from '../../sandbox/index.ts';
import { getAgent } from '../agents/store.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import { repositoryWithToken } from '../environments/branches.ts';
import { compareUrl, listRemoteBranches } from '../environments/git-remote.ts';
import { scrubber } from '../environments/steps.ts';
import { GIT_IDENTITY } from '../environments/plan.ts';
import type { EngineCore } from './live.ts';
import { getConversation } from './store.ts';

export interface PushInput {
  /** The new branch's name; `fountain/<conversation>-<time>` when absent. */
  readonly branch?: string | undefined;
  /** Which environment repository; the conversation's picked one, else the environment's first. */
  readonly repository?: string | undefined;
}

export interface PushDone {
  readonly repository: string;
  readonly branch: string;
  /** What the branch is compared with: the picked branch, the repository's ref, or the remote's default. */
  readonly base: string | null;
  readonly commit: string;
  /** Commits on the branch that no branch of the remote had. */
  readonly commits: number;
  /** GitHub's compare page for a github-like remote; null for another. */
  readonly compare_url: string | null;
}

/** The token's variable, set in this exec's environment only; the helper below is git's way to read it. */
const TOKEN_VAR = 'FOUNTAIN_GIT_PUSH_TOKEN';
const HELPER = `!f() { test "$1" = get || exit 0; echo username=x-access-token; echo "password=$${TOKEN_VAR}"; }; f`;

// Exit 3: no commit at all; 4: nothing the remote lacks. The last line is "<commit> <count>".
const PUSH_SCRIPT = [
  'set -e',
  'dir="$1"; branch="$2"',
  'cd "$dir"',
  'git rev-parse -q --verify HEAD >/dev/null || { echo "no commit in the repository" >&2; exit 3; }',
  'count="$(git rev-list --count HEAD --not --remotes=origin)"',
  'if [ "$count" = 0 ]; then echo "no commit the remote lacks" >&2; exit 4; fi',
  'git push -q origin "HEAD:refs/heads/$branch" 2>&1',
  'echo "$(git rev-parse HEAD) $count"',
].join('\n');

const text = (b: Uint8Array): string => Buffer.from(b).toString('utf8');

export async function pushToBranch(
  c: EngineCore,
  accountId: string,
  id: string,
  input: PushInput,
): Promise<EngineResult<PushDone>> {
  const { db, environments, registry } = c.d;
  const row = await getConversation(db, accountId, id);
  if (!row) return refuse('not_found', 'conversation not found');
  const conv = row.conversation;
  if (c.live.get(id)?.turn) return refuse('conversation_busy', 'a turn is running: push once it has ended');
  const sandbox = row.sandbox;
  if (!sandbox || sandbox.status !== 'ready' || !registry.isRegistered(sandbox.provider as KnownProvider))
    return refuse('sandbox_not_ready', "the conversation's computer is not running: send a message to wake it first");
  const agent = conv.agentId ? await getAgent(db, accountId, conv.agentId) : undefined;
  const environmentId = conv.environmentId ?? agent?.environmentId ?? null;
  if (!environmentId || !environments) return refuse('no_repository', 'the conversation has no environment repository');
  const found = await repositoryWithToken(
    environments,
    accountId,
    environmentId,
    input.repository ?? conv.repositoryBranch?.url,
    conv.launchSecrets,
  );
  if (!found.ok) return refuse(found.error.code, found.error.message);
  const { repository, token, envVars } = found.value;
  const remote = await listRemoteBranches(repository.url, token);
  if (!remote.ok) return refuse(remote.code, remote.message);
  const branch = input.branch ?? `fountain/${id.slice(0, 8)}-${Date.now().toString(36)}`;
  if (remote.value.branches.includes(branch))
    return refuse('branch_exists', `${repository.url} already has a branch ${branch}: name a new one`);
  const base =
    conv.repositoryBranch?.url === repository.url
      ? conv.repositoryBranch.branch
      : (repository.ref ?? remote.value.defaultBranch);

  const adapter = registry.adapterFor(sandbox.provider as KnownProvider);
  const handle = c.live.get(id)?.handle ?? adapter.buildHandle(sandbox.name);
  const scrub = scrubber(token ? [token] : []);
  const r = await adapter.processes.exec(handle, 'sh', ['-c', PUSH_SCRIPT, 'sh', repository.mount_path, branch], {
    env: [
      ...GIT_IDENTITY,
      ...Object.entries(envVars),
      ['GIT_TERMINAL_PROMPT', '0'],
      ...(token
        ? ([
            ['GIT_CONFIG_COUNT', '1'],
            ['GIT_CONFIG_KEY_0', 'credential.helper'],
            ['GIT_CONFIG_VALUE_0', HELPER],
            [TOKEN_VAR, token],
          ] as const)
        : []),
    ],
    dir: repository.mount_path,
    timeoutMs: 300_000,
    stderrToStdout: true,
  });
  if (!r.ok) return refuse('push_failed', `pushing failed: ${scrub(describeError(r.error))}`);
  const said = scrub(text(r.value.output)).trim();
  if (r.value.exitCode === 3 || r.value.exitCode === 4)
    return refuse('nothing_to_push', `${repository.mount_path} has ${said.split('\n').pop()}: commit first`);
  if (r.value.exitCode !== 0) return refuse('push_failed', `git push exited ${r.value.exitCode}: ${said.slice(-600)}`);
  const last = /([0-9a-f]{40,64}) (\d+)\s*$/.exec(said);
  const done: PushDone = {
    repository: repository.url,
    branch,
    base,
    commit: last?.[1] ?? '',
    commits: Number(last?.[2] ?? 0),
    compare_url: base ? compareUrl(repository.url, base, branch) : null,
  };
  c.events.stage(id, null, 'push', 'done', { ...done });
  // The page that follows the answer (and any client reading the log next) finds the push recorded.
  await c.events.flush();
  return accept(done);
}
