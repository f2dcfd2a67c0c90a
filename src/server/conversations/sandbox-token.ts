/**
 * The per-conversation sandbox token: a `sprite`-scoped key minted at every
 * launch of a conversation's agent, replacing the one before it, and revoked when the conversation ends.
 */
import type { AgentCapabilities, McpServer } from '@agentclientprotocol/sdk';
import { and, eq, isNull } from 'drizzle-orm';
import type { EngineDb } from '../store/engine-db.ts';
import { hashApiKey, keyPrefix, mintApiKey } from '../core/keys-store.ts';
import { keysChanged } from '../core/key-cache-store.ts';
import { apiKeys } from '../store/schema.ts';
import { TEAM_CHANNEL } from '../store/team-schema.ts';

/** `:callback_key_ttl_seconds` upstream. */
export const SANDBOX_TOKEN_TTL_MS = 30 * 24 * 3_600_000;

/** The team MCP's server name, in the MCP `initialize` answer and in the session's mcpServers. */
export const TEAM_MCP_NAME = 'fountain-team';

export const teamMcpPath = (conversationId: string): string => `/api/mcp/team/${conversationId}`;

export const sandboxTokenName = (conversationId: string): string => `sprite:${conversationId.slice(0, 8)}`;

export class SandboxTokens {
  readonly #db: EngineDb;
  #baseUrl: string | null;

  constructor(db: EngineDb, baseUrl: string | null) {
    this.#db = db;
    this.#baseUrl = baseUrl;
  }

  /** FOUNTAIN_BASE_URL: PUBLIC_URL, else the address the server listens on (known only after listen). */
  get baseUrl(): string | null {
    return this.#baseUrl;
  }

  /** Fills in the listen address when PUBLIC_URL is unset; an explicit PUBLIC_URL always wins. */
  defaultBaseUrl(url: string): void {
    this.#baseUrl ??= url.replace(/\/+$/, '');
  }

  /**
   * Revokes the conversation's live tokens and mints its next one, in one transaction so a
   * conversation never holds two. Returns the plaintext, which only the agent's environment sees.
   */
  async rotate(accountId: string, conversationId: string, now = new Date()): Promise<string> {
    const key = mintApiKey();
    try {
      await this.#db.transaction(async (tx) => {
        await tx
          .update(apiKeys)
          .set({ revokedAt: now })
          .where(and(eq(apiKeys.conversationId, conversationId), isNull(apiKeys.revokedAt)));
        await tx.insert(apiKeys).values({
          accountId,
          conversationId,
          name: sandboxTokenName(conversationId),
          prefix: keyPrefix(key),
          keyHash: hashApiKey(key),
          scopes: ['sprite'],
          expiresAt: new Date(now.getTime() + SANDBOX_TOKEN_TTL_MS),
        });
      });
    } finally {
      // The previous token may sit in this node's key memory (key-cache-store.ts).
      await keysChanged();
    }
    return key;
  }

  /** A terminated conversation's tokens stop working at once. */
  async revoke(conversationId: string, now = new Date()): Promise<void> {
    try {
      await this.#db
        .update(apiKeys)
        .set({ revokedAt: now })
        .where(and(eq(apiKeys.conversationId, conversationId), isNull(apiKeys.revokedAt)));
    } finally {
      await keysChanged();
    }
  }

  /** The environment the agent process gets: base URL (when known), token, conversation id. */
  env(conversationId: string, token: string): Array<[string, string]> {
    const env: Array<[string, string]> = [];
    if (this.#baseUrl) env.push(['FOUNTAIN_BASE_URL', this.#baseUrl]);
    env.push(['FOUNTAIN_TOKEN', token], ['FOUNTAIN_CONVERSATION_ID', conversationId]);
    return env;
  }
}

/**
 * The platform's MCP servers for a session: the team MCP for a team-channel conversation, over http
 * with the sandbox token, when the agent takes http MCP servers (a stdio-only agent gets none).
 */
export function platformMcpServers(
  conv: { readonly id: string; readonly channelId: string | null },
  baseUrl: string | null,
  token: string,
  capabilities: AgentCapabilities | undefined,
): McpServer[] {
  if (conv.channelId !== TEAM_CHANNEL || !baseUrl || !capabilities?.mcpCapabilities?.http) return [];
  return [
    {
      type: 'http',
      name: TEAM_MCP_NAME,
      url: `${baseUrl}${teamMcpPath(conv.id)}`,
      headers: [{ name: 'Authorization', value: `Bearer ${token}` }],
    },
  ];
}
