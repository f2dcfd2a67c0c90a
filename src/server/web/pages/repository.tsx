/**
 * Starting where the work is, on the pages: the "New conversation" form's branch pick (the agent's
 * environment repositories' branches, listed by the server) and the conversation page's "Push to a branch".
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { getAgent } from '../../agents/service.ts';
import { environmentBranches } from '../../environments/branches.ts';
import { BRANCH_NAME } from '../../environments/git-remote.ts';
import type { ConversationView } from '../../conversations/views.ts';
import type { EventRow } from '../../store/conversation-schema.ts';
import { inWords } from '../actions.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { ErrorNote } from '../layout.tsx';

/** A repository's short name: its path's last part without `.git`. */
export const repoName = (url: string): string => {
  try {
    return (
      new URL(url).pathname
        .split('/')
        .filter(Boolean)
        .pop()
        ?.replace(/\.git$/, '') || url
    );
  } catch {
    return url;
  }
};

/** The form's one select carries both: `<repository url>#<branch>` (a branch name holds no `#`). */
export const branchChoice = z
  .string()
  .max(2300)
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v === '') return undefined;
    const at = v.lastIndexOf('#');
    const branch = v.slice(at + 1);
    if (at <= 0 || !BRANCH_NAME.test(branch)) {
      ctx.addIssue({ code: 'custom', message: 'Pick a branch from the list.' });
      return z.NEVER;
    }
    return { repository: v.slice(0, at), branch };
  });

/**
 * A part of the new-conversation form that loads from `from` with the form and whenever another agent is
 * picked; a pick made while it loads waits for that load, then asks again (htmx logs an abort as an error).
 */
export function LoadsWithAgent({ id, from }: { readonly id: string; readonly from: string }) {
  return (
    <div
      id={id}
      hx-get={from}
      hx-trigger="load, change from:#new-agent"
      hx-include="#new-agent"
      hx-sync="this:queue last"
      hx-target="this"
      hx-swap="innerHTML"
    ></div>
  );
}

/** Where the branch pick loads. */
export function BranchPickHost() {
  return <LoadsWithAgent id="new-branch" from="/conversations/new/branches" />;
}

type Listed = { url: string; ref: string | undefined; branches: readonly string[] } | { url: string; error: string };

function BranchPick(p: { repos: readonly Listed[] }) {
  if (p.repos.length === 0) return null;
  const failed = p.repos.flatMap((r) => ('error' in r ? [r] : []));
  return (
    <>
      <label for="new-branch-select">Repository and branch</label>
      <select id="new-branch-select" name="branch">
        <option value="">As the environment says{p.repos.length === 1 ? ` (${repoName(p.repos[0]!.url)})` : ''}</option>
        {p.repos.map((r) =>
          'error' in r ? null : (
            <optgroup label={repoName(r.url)}>
              {r.branches.map((b) => (
                <option value={`${r.url}#${b}`}>
                  {repoName(r.url)} · {b}
                </option>
              ))}
            </optgroup>
          ),
        )}
      </select>
      {failed.map((r) => (
        <p class="small muted" data-branches-error>
          Could not list the branches of {repoName(r.url)}: {r.error}
        </p>
      ))}
    </>
  );
}

/** The last push of the conversation, from its history: what the push control shows after a reload. */
export function lastPush(
  rows: readonly EventRow[],
): { branch: string; commits: number; compareUrl: string | null } | null {
  for (let i = rows.length - 1; i >= 0; i--) {
    const r = rows[i]!;
    if (r.kind !== 'stage' || r.stage !== 'push' || r.state !== 'done') continue;
    try {
      const d = JSON.parse(r.data || '{}') as Record<string, unknown>;
      return {
        branch: typeof d.branch === 'string' ? d.branch : '',
        commits: typeof d.commits === 'number' ? d.commits : 0,
        compareUrl: typeof d.compare_url === 'string' ? d.compare_url : null,
      };
    } catch {
      return null;
    }
  }
  return null;
}

/** "Push to a branch": shown when the conversation's environment has a repository and its computer has run. */
export function PushControl(p: {
  conv: ConversationView;
  hasRepository: boolean;
  pushed: ReturnType<typeof lastPush>;
  error?: string | undefined;
}) {
  if (!p.hasRepository || p.conv.status === 'terminated' || p.conv.status === 'failed') return null;
  return (
    <form method="post" action={`/conversations/${p.conv.id}/push`} class="row small push" id="push">
      <label for="push-branch">New branch</label>
      <input
        id="push-branch"
        name="branch"
        type="text"
        maxlength={200}
        placeholder={`fountain/${p.conv.id.slice(0, 8)}-…`}
        pattern="[A-Za-z0-9._\/\-]+"
      />
      <button type="submit" class="secondary small-button">
        Push to a branch
      </button>
      {p.pushed ? (
        <span class="pushed" data-pushed-branch={p.pushed.branch}>
          Pushed {p.pushed.commits === 1 ? '1 commit' : `${p.pushed.commits} commits`} to{' '}
          {p.pushed.compareUrl ? (
            <a href={p.pushed.compareUrl} target="_blank" rel="noopener noreferrer">
              {p.pushed.branch} (compare)
            </a>
          ) : (
            <code>{p.pushed.branch}</code>
          )}
        </span>
      ) : null}
      <ErrorNote id="push-error" message={p.error} />
    </form>
  );
}

/** Whether the agent's (or the conversation's) environment has a repository to push. */
export async function hasRepository(deps: WebDeps, accountId: string, conv: ConversationView): Promise<boolean> {
  const agent = conv.agent_id ? await getAgent(deps.db, accountId, conv.agent_id) : undefined;
  const envId = conv.environment_id ?? agent?.environmentId ?? null;
  const env = envId ? await deps.environments.get(accountId, envId) : undefined;
  return (env?.repositories.length ?? 0) > 0;
}

const pushForm = z.object({
  branch: z
    .string()
    .trim()
    .max(200)
    .optional()
    .transform((v) => (v ? v : undefined))
    .pipe(z.string().regex(BRANCH_NAME, 'That is not a branch name: letters, digits and . _ / - only.').optional()),
});

export function repositoryRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();

  app.get('/conversations/new/branches', async (c) => {
    const user = c.get('user');
    const agentId = z.string().uuid().safeParse(c.req.query('agent_id'));
    const agent = agentId.success ? await getAgent(deps.db, user.account.id, agentId.data) : undefined;
    const env = agent?.environmentId ? await deps.environments.get(user.account.id, agent.environmentId) : undefined;
    if (!env || env.repositories.length === 0) return c.html('');
    const repos = await Promise.all(
      env.repositories.map(async (r): Promise<Listed> => {
        const got = await environmentBranches(deps.environments, user.account.id, env.id, r.url);
        return got.ok
          ? { url: r.url, ref: r.ref, branches: got.value.remote.branches }
          : { url: r.url, error: got.error.message };
      }),
    );
    return c.html(<BranchPick repos={repos} />);
  });

  app.post('/conversations/:id/push', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const back = (error?: string) =>
      c.redirect(`/conversations/${id}${error ? `?${new URLSearchParams({ push_error: error })}` : ''}#push`, 303);
    if (!z.string().uuid().safeParse(id).success) return c.text('conversation not found', 404);
    const form = pushForm.safeParse(await c.req.parseBody());
    if (!form.success) return back(form.error.issues[0]?.message ?? 'The branch name is not valid.');
    const r = await deps.engine.push(user.account.id, id, { branch: form.data.branch });
    return r.ok ? back() : back(inWords(r.error).message);
  });

  return app;
}
