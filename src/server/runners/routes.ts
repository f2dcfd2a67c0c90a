/**
 * Runner routes: the account's runners with live `online`, deleting one (its socket closes with
 * 4404), and the WebSocket endpoint's spec entry plus its answer to a plain (non-upgrade) GET.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { CLOSE, RUNNER_BACKENDS, RUNNER_CAPABILITIES } from '../../wire/index.ts';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { RUNNER_WS_PATH, requireOwnName, runnerPreflight } from './hub.ts';
import { audit } from '../account/audit.ts';
import { deleteRunner, listRunners, RUNNER_NAME_PATTERN, runnerBackendOf, runnerCapabilitiesOf } from './service.ts';
import type { Runner } from '../store/schema.ts';
import { bearer, errorResponses, IdParam, iso, newRouter, type RouteDeps } from '../http/common.ts';

export const RunnerSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    hostname: z.string().nullable(),
    os: z.string().nullable(),
    arch: z.string().nullable(),
    version: z.string().nullable(),
    root: z.string().nullable(),
    backend: z.enum(RUNNER_BACKENDS).nullable().openapi({
      description:
        'What a sandbox is on that machine, as reported at its last connection; null: not reported (an older daemon)',
    }),
    capabilities: z
      .array(z.enum(RUNNER_CAPABILITIES))
      .openapi({ description: 'The contract capabilities its backend advertised at its last connection' }),
    online: z.boolean(),
    connected_at: z.string().nullable(),
    last_seen_at: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi('Runner');

const RunnerQuery = z.object({
  name: z.string().regex(RUNNER_NAME_PATTERN).openapi({ description: 'Runner name, unique per account' }),
  hostname: z.string().max(255).optional(),
  os: z.string().max(40).optional(),
  arch: z.string().max(40).optional(),
  version: z.string().max(80).optional(),
  root: z.string().max(1024).optional(),
  backend: z
    .string()
    .optional()
    .openapi({ description: `process, namespace or microvm; optional (older daemons send none)` }),
  capabilities: z
    .string()
    .optional()
    .openapi({ description: `Comma-separated: ${RUNNER_CAPABILITIES.join(', ')}; absent means suspend,attach` }),
});

export function runnerRoutes(deps: RouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger, host } = deps;

  const view = (r: Runner, accountId: string) => {
    const live = host.whereis(r.id);
    return {
      id: r.id,
      name: r.name,
      hostname: r.hostname,
      os: r.os,
      arch: r.arch,
      version: r.version,
      root: r.root,
      backend: runnerBackendOf(r),
      capabilities: runnerCapabilitiesOf(r),
      online: live !== undefined && live.info.accountId === accountId,
      connected_at: iso(r.connectedAt),
      last_seen_at: iso(r.lastSeenAt),
      created_at: r.createdAt.toISOString(),
    };
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/runners',
      summary: "The account's runners, most recently connected first, then by name",
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(RunnerSchema) }) } },
        },
        ...errorResponses(401, 403),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const rows = await listRunners(db, accountId);
      return c.json({ data: rows.map((r) => view(r, accountId)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/runners/{id}',
      summary: 'Delete a runner record; a connected daemon is closed with 4404 and may re-register',
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const accountId = c.get('principal').account.id;
      const deleted = isUuid(id) ? await deleteRunner(db, accountId, id) : undefined;
      if (!deleted) throw ApiError.notFound('runner');
      await audit(db, {
        accountId,
        actor: 'api',
        action: 'runner.deleted',
        subjectId: id,
        data: { name: deleted.name },
      });
      const live = host.whereis(id);
      if (live && live.info.accountId === accountId) live.close(CLOSE.runnerDeleted, 'runner deleted');
      return c.body(null, 204);
    },
  );

  // Only the spec entry and the plain-GET answer live here; upgrades are handled by runner-hub.ts.
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: RUNNER_WS_PATH,
    summary: 'The runner daemon’s WebSocket (registration happens before the upgrade)',
    security: bearer,
    request: { query: RunnerQuery },
    responses: {
      101: { description: 'Switching Protocols: the runner wire protocol follows' },
      ...errorResponses(400, 401, 403, 404, 409),
    },
  });
  app.get(RUNNER_WS_PATH, async (c) => {
    const principal = await runnerPreflight(deps, c.req.header('authorization'));
    const name = c.req.query('name');
    if (name !== undefined) await requireOwnName(deps, principal, name);
    throw new ApiError(400, 'not_a_websocket', 'this endpoint only accepts a WebSocket upgrade');
  });

  return app;
}
