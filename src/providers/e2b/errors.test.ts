/**
 * Unit tests for the E2B error normalisation and exit-code reading.
 * Pure functions only; the wire-level behaviour is covered against the stub elsewhere.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTransient } from '../../sandbox/index.ts';
import { fromConnect, fromHttp, fromTransport, redact, retryAfterMs } from './errors.ts';
import { exitCodeOf } from './command.ts';

describe('e2b errors', () => {
  it('maps control-plane statuses onto the taxonomy', () => {
    const at = (status: number, body: unknown = {}, headers = {}) =>
      fromHttp({ status, body: JSON.stringify(body), headers }, 'op');
    assert.equal(at(404).code, 'not_found');
    assert.equal(at(401).code, 'denied');
    assert.equal(at(403).code, 'denied');
    assert.equal(at(400).code, 'invalid');
    assert.equal(at(409).code, 'invalid');
    assert.equal(at(507).code, 'invalid');
    for (const s of [500, 502, 503, 504, 408]) assert.equal(at(s).code, 'unavailable', String(s));
    const capacity = at(503, { code: 503, message: 'no capacity', error_code: 'sandbox_capacity_unavailable' });
    assert.match(String(capacity.detail), /sandbox_capacity_unavailable/);
    assert.ok(isTransient(capacity));
    const limited = at(429, { code: 429, message: 'x' }, { 'retry-after': '3' });
    assert.deepEqual([limited.code, limited.retryAfterMs], ['rate_limited', 3000]);
    assert.equal(at(429).retryAfterMs, undefined);
  });

  it('reads Retry-After as seconds or a date', () => {
    assert.equal(retryAfterMs('2'), 2000);
    assert.equal(retryAfterMs('0.5'), 500);
    assert.equal(retryAfterMs(new Date(10_000).toUTCString(), 4_000), 6000);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(undefined), undefined);
  });

  it('maps Connect codes by what a retry could change', () => {
    const c = (code: string) => fromConnect({ code }, 'op').code;
    assert.equal(c('not_found'), 'not_found');
    assert.equal(c('unauthenticated'), 'denied');
    assert.equal(c('permission_denied'), 'denied');
    assert.equal(c('resource_exhausted'), 'rate_limited');
    assert.equal(c('invalid_argument'), 'invalid');
    assert.equal(c('failed_precondition'), 'invalid');
    for (const t of ['unavailable', 'deadline_exceeded', 'internal', 'unknown', 'aborted', 'something_new'])
      assert.equal(c(t), 'unavailable', t);
  });

  it('transport failures are transient and never not_found', () => {
    const e = fromTransport(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'op');
    assert.equal(e.code, 'unavailable');
    assert.match(String(e.detail), /ECONNREFUSED/);
  });

  it('scrubs secrets and bounds the length of vendor text', () => {
    const key = 'e2b_secret_value';
    const e = fromHttp({ status: 500, body: JSON.stringify({ code: 500, message: `bad key ${key}\nline` }) }, 'op', [
      key,
    ]);
    assert.ok(!String(e.detail).includes(key));
    assert.ok(!String(e.detail).includes('\n'));
    assert.ok(redact('x'.repeat(1000), []).length < 200);
  });

  it('reads exit codes from end events: absent is 0 only when exited', () => {
    assert.equal(exitCodeOf({ exitCode: undefined, exited: true, status: 'exit status 0' }), 0);
    assert.equal(exitCodeOf({ exitCode: 2, exited: true, status: 'exit status 2' }), 2);
    assert.equal(exitCodeOf({ exitCode: -1, exited: false, status: 'signal: killed' }), 137);
    assert.equal(exitCodeOf({ exitCode: -1, exited: false, status: 'signal: terminated' }), 143);
    assert.equal(exitCodeOf({ exitCode: undefined, exited: false, status: '' }), undefined);
  });
});

describe('e2b options from the environment', () => {
  it('reads E2B_* variables, blank equals unset, no key means off', async () => {
    const { optionsFromEnv } = await import('./config.ts');
    assert.equal(optionsFromEnv({}), null);
    assert.equal(optionsFromEnv({ E2B_API_KEY: '  ' }), null);
    assert.deepEqual(
      optionsFromEnv({
        E2B_API_KEY: 'k',
        E2B_BASE_URL: '',
        E2B_TEMPLATE: 'fountain',
        E2B_USER: 'sprite',
        E2B_SANDBOX_URL: ' ',
      }),
      {
        apiKey: 'k',
        template: 'fountain',
        user: 'sprite',
      },
    );
  });
});
