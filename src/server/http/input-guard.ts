/**
 * What every request body is held to before any route reads it: at most 1 MiB on every route
 * (/signin included; 160 MiB where a message may carry images), a type the route takes, JSON nested at
 * most 32 levels, and no NUL bytes.
 */
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { nestsDeeperThan } from '../../wire/depth.ts';
import { ApiError } from './errors.ts';

/** Bodies beyond this are refused with 413 while they are read, never read whole first. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Deeper JSON is refused before it is parsed: nothing Fountain takes nests this far. */
export const MAX_JSON_DEPTH = 32;

/**
 * A message with its images: ten 10 MB images are 140 MB as base64 (a little more form-encoded by the
 * web page), with room for the message itself.
 */
export const MAX_IMAGE_BODY_BYTES = 160 * 1024 * 1024;

/** The POSTs that take images: create a conversation, a prompt (API and web page), the new-conversation form. */
const IMAGE_ROUTES = [
  /^\/api\/conversations\/?$/,
  /^\/api\/conversations\/[^/]+\/prompts\/?$/,
  /^\/conversations\/[^/]+\/prompts\/?$/,
];

export const bodyLimitFor = (method: string, path: string): number =>
  method === 'POST' && IMAGE_ROUTES.some((r) => r.test(path)) ? MAX_IMAGE_BODY_BYTES : MAX_BODY_BYTES;

const limited = (maxSize: number): MiddlewareHandler =>
  bodyLimit({
    maxSize,
    onError: () => {
      // The unread rest of the body makes the connection unusable for another request.
      throw new ApiError(
        413,
        'payload_too_large',
        `request bodies are limited to ${maxSize} bytes here`,
        { limit: maxSize },
        { connection: 'close' },
      );
    },
  });

/** The 1 MiB limit for every route, and the larger one where a message may carry images. */
export const limitBodies = (): MiddlewareHandler => {
  const small = limited(MAX_BODY_BYTES);
  const large = limited(MAX_IMAGE_BODY_BYTES);
  return (c, next) =>
    bodyLimitFor(c.req.method, c.req.path) === MAX_IMAGE_BODY_BYTES ? large(c, next) : small(c, next);
};

const invalid = (field: string, why: string): ApiError =>
  new ApiError(422, 'validation_failed', `${field}: ${why}`, { errors: { [field]: [why] } });

const NUL_WORDS = 'must not contain NUL bytes';

/** The dotted path of the first key or string value holding a NUL byte, or null. */
export function nulField(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return value.includes('\0') ? path || '_' : null;
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = nulField(value[i], path ? `${path}.${i}` : String(i));
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    const here = path ? `${path}.${k.replaceAll('\0', '\\u0000')}` : k.replaceAll('\0', '\\u0000');
    if (k.includes('\0')) return here;
    const hit = nulField(v, here);
    if (hit) return hit;
  }
  return null;
}

/**
 * Types and contents: multipart is taken nowhere (415), forms only by the web pages (415 on /api),
 * JSON too deep or any text with a NUL byte is 422 naming the field (PostgreSQL refuses NUL in text).
 */
export const checkBodies = (): MiddlewareHandler => async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'OPTIONS') return next();
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  const api = c.req.path.startsWith('/api/');
  if (type === 'multipart/form-data' || (api && type === 'application/x-www-form-urlencoded')) {
    throw new ApiError(
      415,
      'unsupported_media_type',
      api
        ? `${type} is not taken here: send application/json`
        : `${type} is not taken here: forms are sent as application/x-www-form-urlencoded`,
    );
  }
  if (type === 'application/json' || type.endsWith('+json')) {
    const text = await c.req.text();
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw invalid('_', `JSON may nest at most ${MAX_JSON_DEPTH} levels`);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return next(); // the route's own validator answers malformed JSON
    }
    const field = nulField(value);
    if (field) throw invalid(field, NUL_WORDS);
  } else if (type === 'application/x-www-form-urlencoded') {
    const form = await c.req.parseBody();
    for (const [k, v] of Object.entries(form)) {
      if (k.includes('\0') || (typeof v === 'string' && v.includes('\0')))
        throw invalid(k.replaceAll('\0', '\\u0000'), NUL_WORDS);
    }
  }
  return next();
};
