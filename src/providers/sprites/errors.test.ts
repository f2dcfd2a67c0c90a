import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isTransient } from '../../sandbox/index.ts';
import { fromHttpStatus, fromTransport } from './errors.ts';
import { spritesOptionsFromEnv, resolveSpritesConfig } from './config.ts';
import { inspect } from 'node:util';

test('HTTP statuses map onto the taxonomy; only 404 is not_found', () => {
  assert.deepEqual(fromHttpStatus(404), { code: 'not_found' });
  assert.equal(fromHttpStatus(401).code, 'denied');
  assert.equal(fromHttpStatus(403).code, 'denied');
  assert.equal(fromHttpStatus(400).code, 'invalid');
  assert.equal(fromHttpStatus(409).code, 'invalid');
  assert.equal(fromHttpStatus(422).code, 'invalid');
  for (const s of [408, 500, 502, 503, 504]) {
    const e = fromHttpStatus(s);
    assert.equal(e.code, 'unavailable', String(s));
    assert.equal(isTransient(e), true);
  }
  assert.equal(fromHttpStatus(302).code, 'provider');
});

test('429 takes its retry hint from the body, else from Retry-After', () => {
  const body = { error: 'concurrent_sprite_limit_exceeded', retry_after_seconds: 12 };
  assert.deepEqual(fromHttpStatus(429, body), {
    code: 'rate_limited',
    detail: 'concurrent_sprite_limit_exceeded',
    retryAfterMs: 12_000,
  });
  assert.equal(fromHttpStatus(429, undefined, '3').retryAfterMs, 3000);
  assert.equal(fromHttpStatus(429).retryAfterMs, undefined);
});

test('a vendor error body contributes only a machine code, never prose', () => {
  assert.equal(fromHttpStatus(400, { error: 'invalid_name' }).detail, 'invalid_name');
  assert.equal(fromHttpStatus(400, { error: 'token abc123 is bad, see https://x' }).detail, 'http_400');
});

test('transport failures are unavailable, never not_found', () => {
  const refused = Object.assign(new TypeError('fetch failed'), {
    cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }),
  });
  assert.deepEqual(fromTransport(refused), { code: 'unavailable', detail: 'connection_refused' });
  assert.deepEqual(fromTransport(new DOMException('x', 'TimeoutError')), { code: 'unavailable', detail: 'timeout' });
  assert.deepEqual(fromTransport('weird'), { code: 'unavailable', detail: 'transport_error' });
});

test('config from the environment: blank equals unset, the token stays boxed', () => {
  const blank = spritesOptionsFromEnv({ SPRITES_TOKEN: '  ', SPRITES_BASE_URL: '', SPRITES_TIMEOUT_MS: '' });
  assert.ok(blank.ok);
  assert.deepEqual(blank.value, {});
  const cfg = resolveSpritesConfig(blank.value);
  assert.equal(cfg.token, null);
  assert.equal(cfg.baseUrl.href, 'https://api.sprites.dev/');
  assert.equal(cfg.timeoutMs, 30_000);

  const set = spritesOptionsFromEnv({
    SPRITES_TOKEN: 'tok-xyz-123',
    SPRITES_BASE_URL: 'http://127.0.0.1:9',
    SPRITES_TIMEOUT_MS: '500',
  });
  assert.ok(set.ok);
  assert.ok(!inspect(set.value).includes('tok-xyz-123') && !JSON.stringify(set.value).includes('tok-xyz-123'));
  const c2 = resolveSpritesConfig(set.value);
  assert.equal(c2.token?.reveal(), 'tok-xyz-123');
  assert.equal(c2.baseUrl.href, 'http://127.0.0.1:9/');
  assert.equal(c2.timeoutMs, 500);

  const bad = spritesOptionsFromEnv({ SPRITES_BASE_URL: 'ftp://x', SPRITES_TIMEOUT_MS: 'soon' });
  assert.ok(!bad.ok);
  assert.equal(bad.error.code, 'invalid_config');
  assert.match(bad.error.detail, /SPRITES_BASE_URL/);
  assert.match(bad.error.detail, /SPRITES_TIMEOUT_MS/);
});
