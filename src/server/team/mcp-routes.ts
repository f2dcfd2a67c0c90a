/**
 * `POST /api/mcp/team/:conversation_id`: the team MCP over streamable HTTP (JSON responses, no SSE
 * stream), for team-channel conversations, called with that conversation's sandbox token or a full key.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { hasScope, requireKey, type AppEnv } from '../http/auth.ts';
import type { TeamService } from './service.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { handleMcpMessage, type JsonRpcResponse, type TeamMcpContext } from './mcp.ts';
import { getConversation } from '../conversations/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { TEAM_CHANNEL } from '../store/team-schema.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';

export interface McpTeamRouteDeps extends RouteDeps {
  readonly team: TeamService;
}

const Param = z.object({ conversation_id: z.string().openapi({ param: { name: 'conversation_id', in: 'path' } }) });

const JsonRpcBody = z
  .union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))])
  .openapi('McpJsonRpc', { description: 'A JSON-RPC 2.0 message (or a batch): initialize, tools/list, tools/call, ping, notifications.' });

export function mcpTeamRoutes(deps: McpTeamRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const db = deps.db as unknown as EngineDb;
  const auth = requireKey(deps.db, deps.logger, 'any');
  const path = '/api/mcp/team/{conversation_id}';

  app.openapi(
    createRoute({
      method: 'post',
      path,
      summary:
        'Team MCP server `fountain-team` (tools list_teammates, get_teammate, send_to_teammate, wait_for_teammate, read_teammate). Team-channel conversations only; the conversation\'s own sandbox token or a full-scope key.',
      security: bearer,
      middleware: [auth] as const,
      request: { params: Param },
      responses: {
        200: { description: 'JSON-RPC response', content: { 'application/json': { schema: JsonRpcBody } } },
        202: { description: 'notification accepted' },
        ...errorResponses(400, 401, 403, 404),
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      const id = c.req.valid('param').conversation_id;
      const row = isUuid(id) ? await getConversation(db, principal.account.id, id) : undefined;
      if (!row) throw ApiError.notFound('conversation');
      if (row.conversation.channelId !== TEAM_CHANNEL) {
        throw new ApiError(403, 'not_a_team_conversation', 'the team MCP serves only team conversations (channel fountain:team)');
      }
      if (!hasScope(principal, 'full') && principal.key.conversationId !== id) {
        throw new ApiError(403, 'token_not_for_this_conversation', "only this conversation's sandbox token (or a full-scope key) may use its team MCP");
      }
      let body: unknown;
      try {
        body = JSON.parse(await c.req.text());
      } catch {
        return c.json({ jsonrpc: '2.0' as const, id: null, error: { code: -32700, message: 'parse error' } }, 200);
      }
      const ctx: TeamMcpContext = { db, team: deps.team, accountId: principal.account.id, conversationId: id, signal: c.req.raw.signal };
      const messages = Array.isArray(body) ? body : [body];
      const answers: JsonRpcResponse[] = [];
      for (const m of messages) {
        const a = await handleMcpMessage(ctx, m);
        if (a) answers.push(a);
      }
      if (answers.length === 0) return c.body(null, 202);
      return c.json(Array.isArray(body) ? answers : answers[0]!, 200);
    },
  );

  // Streamable HTTP lets a client open a GET stream for server messages; this server has none to send.
  for (const method of ['get', 'delete'] as const) {
    app.openapi(
      createRoute({
        method,
        path,
        summary: 'Not offered: the team MCP answers every request in its POST response and keeps no session.',
        security: bearer,
        request: { params: Param },
        responses: errorResponses(405),
      }),
      (c) => c.json({ error: 'method_not_allowed', message: 'the team MCP takes POST only' }, 405),
    );
  }
  return app;
}
