/**
 * Pieces every route module shares: the dependencies routes see, the error response schema
 * for the spec, and the bearer security requirement.
 */
import { OpenAPIHono, z } from '@hono/zod-openapi';
import type { AppEnv } from './auth.ts';
import { ApiError } from './errors.ts';
import type { Logger } from 'pino';
import type { RunnerHost } from '../../providers/runner/host.ts';
import type { EventBus } from '../cluster/bus.ts';
import type { Db } from '../store/db.ts';

export interface RouteDeps {
  readonly db: Db;
  readonly logger: Logger;
  readonly host: RunnerHost;
  readonly bus: EventBus;
  readonly runnersEnabled: boolean;
}

export const ErrorSchema = z
  .object({
    error: z.string().openapi({ example: 'not_found' }),
    message: z.string().optional(),
    errors: z.record(z.string(), z.array(z.string())).optional(),
  })
  .passthrough()
  .openapi('Error');

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [s, { description: `error ${s}`, content: { 'application/json': { schema: ErrorSchema } } }]),
  );

export const bearer = [{ bearer: [] as string[] }];

export const IdParam = z.object({ id: z.string().openapi({ param: { name: 'id', in: 'path' }, example: '0b7c...' }) });

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * A router whose failed validations throw the 422 the error handler renders; `codeOf` names a
 * field's own code (e.g. `warm_pool_invalid`) where `validation_failed` says too little.
 */
export const newRouter = (codeOf?: (e: z.ZodError) => string | undefined): OpenAPIHono<AppEnv> =>
  new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw ApiError.validation(result.error, 422, codeOf?.(result.error) ?? 'validation_failed');
    },
  });

/** The SSE `Last-Event-ID` header as an event id; anything but digits is no cursor. */
export function lastEventIdOf(header: string | undefined): number | undefined {
  return header !== undefined && /^\d+$/.test(header.trim()) ? Number(header.trim()) : undefined;
}

/** An http(s) URL that carries no user info (a credential in a URL would be stored and shown as text). */
export function isHttpUrlWithoutUserInfo(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === '';
  } catch {
    return false;
  }
}
