/**
 * An environment's repository with its clone token, and the branches its remote lists: what the "New
 * conversation" pick and a push to a branch need. The token is opened here and handed to git only.
 */
import type { Repository } from '../store/environment-schema.ts';
import { listRemoteBranches, type RemoteBranches } from './git-remote.ts';
import type { EnvironmentService } from './service.ts';

export type RepoRefusalCode =
  | 'environment_not_found'
  | 'secret_unreadable'
  | 'no_repository'
  | 'repository_not_in_environment'
  | 'remote_unreachable'
  | 'remote_auth_failed'
  | 'branch_not_found';

export interface RepoRefusal {
  readonly code: RepoRefusalCode;
  readonly message: string;
}

export type RepoResult<T> = { ok: true; value: T } | { ok: false; error: RepoRefusal };

export interface RepositoryWithToken {
  readonly repository: Repository;
  /** The clone token (the secret `secret_key` names), or undefined for a public repository. */
  readonly token: string | undefined;
  /** The environment's variables (not secrets): git in the sandbox reads its own (GIT_SSL_CAINFO, a proxy) from them. */
  readonly envVars: Readonly<Record<string, string>>;
}

const no = (code: RepoRefusalCode, message: string): { ok: false; error: RepoRefusal } => ({
  ok: false,
  error: { code, message },
});

/** The environment's repository `url` (its first when none is named) and its token, opened. */
export async function repositoryWithToken(
  envs: EnvironmentService,
  accountId: string,
  environmentId: string,
  url: string | undefined,
  launchSealed: string | null = null,
): Promise<RepoResult<RepositoryWithToken>> {
  const launch = await envs.forLaunch(accountId, environmentId, launchSealed);
  if (!launch.ok) return no(launch.code, launch.message);
  const repos = launch.value.environment?.repositories ?? [];
  if (repos.length === 0) return no('no_repository', 'the environment has no repository');
  const repository = url === undefined ? repos[0]! : repos.find((r) => r.url === url);
  if (!repository) return no('repository_not_in_environment', `${url} is not one of the environment's repositories`);
  const token = repository.secret_key ? launch.value.secrets.reveal().get(repository.secret_key) : undefined;
  return { ok: true, value: { repository, token, envVars: launch.value.environment?.envVars ?? {} } };
}

/** The branches of an environment's repository, listed by the server with the environment's token. */
export async function environmentBranches(
  envs: EnvironmentService,
  accountId: string,
  environmentId: string,
  url: string | undefined,
): Promise<RepoResult<{ repository: Repository; remote: RemoteBranches }>> {
  const r = await repositoryWithToken(envs, accountId, environmentId, url);
  if (!r.ok) return r;
  const listed = await listRemoteBranches(r.value.repository.url, r.value.token);
  if (!listed.ok) return no(listed.code, listed.message);
  return { ok: true, value: { repository: r.value.repository, remote: listed.value } };
}

/** Checks that `branch` exists on the environment's repository (the one named, or its first). */
export async function checkBranch(
  envs: EnvironmentService,
  accountId: string,
  environmentId: string,
  url: string | undefined,
  branch: string,
): Promise<RepoResult<{ url: string; branch: string }>> {
  const r = await environmentBranches(envs, accountId, environmentId, url);
  if (!r.ok) return r;
  if (!r.value.remote.branches.includes(branch))
    return no('branch_not_found', `${r.value.repository.url} has no branch ${branch}`);
  return { ok: true, value: { url: r.value.repository.url, branch } };
}
