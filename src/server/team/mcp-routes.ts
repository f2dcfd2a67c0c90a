/**
 * `POST /api/mcp/team/:conversation_id`: the team MCP over @hono/mcp's streamable HTTP (stateless,
 * JSON responses), for team-channel conversations, called with that conversation's sandbox token or a full key.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { HTTPException } from 'hono/http-exception';
import { hasScope, requireKey, type AppEnv } from '../http/auth.ts';
import type { TeamService } from './service.ts';
import type { ConversationEngine } from '../conversations/engine.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { findConversation } from '../conversations/history.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { TEAM_CHANNEL } from './reads.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';

export interface McpTeamRouteDeps extends RouteDeps {
  readonly team: TeamService;
  /** For label_conversation. */
  readonly engine: ConversationEngine;
}

const Param = z.object({ conversation_id: z.string().openapi({ param: { name: 'conversation_id', in: 'path' } }) });

const JsonRpcBody = z
  .union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))])
  .openapi('McpJsonRpc', {
    description: 'A JSON-RPC 2.0 message (or a batch): initialize, tools/list, tools/call, ping, notifications.',
  });

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
        "Team MCP server `fountain-team` (tools list_teammates, get_teammate, send_to_teammate, wait_for_teammate, read_teammate, label_conversation). Team-channel conversations only; the conversation's own sandbox token or a full-scope key.",
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
      const row = isUuid(id) ? await findConversation(db, principal.account.id, id) : undefined;
      if (!row) throw ApiError.notFound('conversation');
      if (row.conversation.channelId !== TEAM_CHANNEL) {
        throw new ApiError(
          403,
          'not_a_team_conversation',
          'the team MCP serves only team conversations (channel fountain:team)',
        );
      }
      if (!hasScope(principal, 'full') && principal.key.conversationId !== id) {
        throw new ApiError(
          403,
          'token_not_for_this_conversation',
          "only this conversation's sandbox token (or a full-scope key) may use its team MCP",
        );
      }
      // Imported on the first call, not at start: the MCP SDK and its transport cost ~200 ms of CPU at
      // every boot (docs/benchmarks.md, startup); the module cache makes later calls free.
      const [{ StreamableHTTPTransport }, { teamMcpServer }] = await Promise.all([
        import('@hono/mcp'),
        import('./mcp.ts'),
      ]);
      // A server and transport per request: the server keeps no session, and each knows its caller.
      const server = teamMcpServer({
        db,
        team: deps.team,
        engine: deps.engine,
        accountId: principal.account.id,
        conversationId: id,
        signal: c.req.raw.signal,
        logger: deps.logger,
      });
      const transport = new StreamableHTTPTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      try {
        await server.connect(transport);
        return (await transport.handleRequest(c)) ?? c.body(null, 202);
      } catch (e) {
        // The transport's refusals (bad JSON-RPC, wrong media type) carry a JSON-RPC error body.
        if (e instanceof HTTPException) return e.getResponse();
        throw e;
      } finally {
        await server.close();
      }
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
