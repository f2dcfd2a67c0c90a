/**
 * What a conversation's sandbox token may do (docs/api.md, "Sandbox tokens"): act for its
 * conversation — read it, its tree and its teammates, message teammates, start child conversations
 * no looser than its own — and nothing that widens its authority or reaches outside its tree.
 */
import { eq } from 'drizzle-orm';
import type { Principal } from './auth.ts';
import { ApiError } from './errors.ts';
import { conversations } from '../store/conversation-schema.ts';
import type { Db } from '../store/db.ts';
import { TEAM_CHANNEL } from '../store/team-schema.ts';

/**
 * allow: answered by the route as for any key; read: the conversation in the path is the token's,
 * in its tree, or a teammate's; tree: the token's conversation or a descendant; child: a new
 * conversation under the token's (the engine checks its policy). Anything not listed is refused.
 */
export type SandboxRule = 'allow' | 'read' | 'tree' | 'child';

export interface SandboxRuleRow {
  readonly method: string;
  readonly path: RegExp;
  readonly rule: SandboxRule;
}

const ID = '([^/]+)';
export const SANDBOX_TOKEN_RULES: readonly SandboxRuleRow[] = [
  { method: 'GET', path: /^\/api\/auth\/me$/, rule: 'allow' },
  { method: 'GET', path: /^\/api\/(agents|catalog)$/, rule: 'allow' },
  { method: 'GET', path: /^\/api\/agents\/[^/]+$/, rule: 'allow' },
  { method: 'GET', path: /^\/api\/team(\/stream|\/schedules)?$/, rule: 'allow' },
  { method: 'GET', path: /^\/api\/team\/[^/]+(\/conversations|\/schedules(\/[^/]+)?)?$/, rule: 'allow' },
  { method: 'POST', path: /^\/api\/team\/[^/]+\/messages$/, rule: 'allow' },
  // The route itself checks that the MCP served is the token's own conversation's.
  { method: 'POST', path: /^\/api\/mcp\/team\/[^/]+$/, rule: 'allow' },
  // The route refuses it with sprite_may_not_answer: a sandbox never answers its own permission requests.
  { method: 'POST', path: /^\/api\/conversations\/[^/]+\/requests\/[^/]+$/, rule: 'allow' },
  { method: 'POST', path: /^\/api\/conversations$/, rule: 'child' },
  { method: 'GET', path: new RegExp(`^/api/conversations/${ID}(/turns|/events|/stream)?$`), rule: 'read' },
  { method: 'POST', path: new RegExp(`^/api/conversations/${ID}/(prompts|interrupt|terminate)$`), rule: 'tree' },
  { method: 'DELETE', path: new RegExp(`^/api/conversations/${ID}$`), rule: 'tree' },
  // An agent labels its own conversation (any agent, not only a teammate with the team MCP).
  { method: 'POST', path: new RegExp(`^/api/conversations/${ID}/labels$`), rule: 'tree' },
  { method: 'DELETE', path: new RegExp(`^/api/conversations/${ID}/labels/[^/]+$`), rule: 'tree' },
];

const MAX_TREE_DEPTH = 64;

const forbidden = (method: string, path: string, why: string): ApiError =>
  new ApiError(
    403,
    'sandbox_token_forbidden',
    `a sandbox token acts for its own conversation: ${method} ${path} ${why}`,
  );

/** Refuses (403 sandbox_token_forbidden) what the rules do not give a sandbox token; returns the matched rule. */
export async function checkSandboxToken(db: Db, p: Principal, method: string, path: string): Promise<SandboxRule> {
  const row = SANDBOX_TOKEN_RULES.find((r) => r.method === method && r.path.test(path));
  if (!row) throw forbidden(method, path, 'is not among what it may do');
  const own = p.key.conversationId;
  if (row.rule === 'allow') return row.rule;
  if (!own) throw forbidden(method, path, 'needs the conversation the token was minted for');
  if (row.rule === 'child') return row.rule;
  const target = row.path.exec(path)?.[1] ?? '';
  if (await inTree(db, own, target)) return row.rule;
  if (row.rule === 'read' && (await isTeammate(db, p.account.id, target))) return row.rule;
  throw forbidden(
    method,
    path,
    row.rule === 'read'
      ? 'reads only its own tree and its teammates'
      : 'touches only its own conversation and those it created',
  );
}

/** The token's conversation itself, or one created under it (walking parents up, bounded). */
async function inTree(db: Db, root: string, target: string): Promise<boolean> {
  let at: string | null = target;
  for (let i = 0; at !== null && i < MAX_TREE_DEPTH; i++) {
    if (at === root) return true;
    const found: Array<{ parent: string | null }> = await db
      .select({ parent: conversations.parentConversationId })
      .from(conversations)
      .where(eq(conversations.id, at))
      .limit(1)
      .catch(() => []);
    at = found[0]?.parent ?? null;
  }
  return false;
}

async function isTeammate(db: Db, accountId: string, target: string): Promise<boolean> {
  const found = await db
    .select({ accountId: conversations.accountId, channelId: conversations.channelId })
    .from(conversations)
    .where(eq(conversations.id, target))
    .limit(1)
    .catch(() => []);
  return found[0]?.accountId === accountId && found[0]?.channelId === TEAM_CHANNEL;
}
