/**
 * The one error type routes throw, and the one place it becomes an HTTP response:
 * `{error: <code>, message, ...extras}` with the status the code carries.
 */
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Logger } from 'pino';
import type { z } from 'zod';

export interface ApiErrorBody {
  error: string;
  message?: string;
  [extra: string]: unknown;
}

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message?: string,
    readonly extras: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? code);
    this.name = 'ApiError';
  }

  body(): ApiErrorBody {
    return { error: this.code, message: this.message, ...this.extras };
  }

  static notFound(what = 'resource'): ApiError {
    return new ApiError(404, 'not_found', `${what} not found`);
  }

  static unauthorized(
    reason: 'api_key_missing' | 'api_key_invalid' | 'api_key_revoked' | 'api_key_expired',
    message: string,
  ): ApiError {
    return new ApiError(401, reason, message, {}, { 'www-authenticate': 'Bearer' });
  }

  static insufficientScope(required: 'full'): ApiError {
    return new ApiError(403, 'insufficient_scope', `this action needs a ${required}-scope API key`, {
      required_scope: required,
    });
  }

  /** A body, query or path that fails its schema: the field paths and their messages. */
  static validation(error: z.ZodError, status: 400 | 422 = 422, code = 'validation_failed'): ApiError {
    const errors: Record<string, string[]> = {};
    for (const issue of error.issues) {
      const field = issue.path.length ? issue.path.join('.') : '_';
      (errors[field] ??= []).push(issue.message);
    }
    const first = error.issues[0];
    const message = first ? `${first.path.length ? first.path.join('.') + ': ' : ''}${first.message}` : 'invalid input';
    return new ApiError(status, code, message, { errors });
  }
}

const HTTP_CODES: Partial<Record<number, string>> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

/** Maps anything thrown inside a route to a response; unexpected errors are logged and answer 500. */
export function toApiError(e: unknown, logger: Logger): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof HTTPException) {
    // Hono's own refusals (malformed JSON, wrong content type, body limit) are the client's fault.
    const code = /malformed json/i.test(e.message) ? 'invalid_json' : (HTTP_CODES[e.status] ?? 'bad_request');
    return new ApiError(e.status as ContentfulStatusCode, code, e.message || code);
  }
  logger.error({ err: e }, 'unhandled error in route');
  return new ApiError(500, 'internal_error', 'internal server error');
}

export function errorResponse(c: Context, e: ApiError): Response {
  for (const [k, v] of Object.entries(e.headers)) c.header(k, v);
  return c.json(e.body(), e.status);
}
