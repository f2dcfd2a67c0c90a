import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import {
  Private,
  backoffDelay,
  checkLifecycle,
  credentialPresent,
  idleAction,
  isTransient,
  mintHostedName,
  mintRunnerName,
  parseRunnerName,
  sandboxError,
  withBackoff,
  ok,
  err,
} from './index.ts';

test('retry classification follows the closed taxonomy; unknown shapes are transient', () => {
  for (const c of ['not_found', 'truncated', 'not_supported', 'already_exists', 'denied', 'invalid'] as const) {
    assert.equal(isTransient(sandboxError(c)), false, c);
  }
  for (const c of [
    'unavailable',
    'rate_limited',
    'closed_before_exit',
    'command_exited',
    'write_failed',
    'provider',
  ] as const) {
    assert.equal(isTransient(sandboxError(c)), true, c);
  }
  assert.equal(isTransient({ code: 'timeout' }), true);
  assert.equal(isTransient('weird'), true);
});

test('backoff delays sit between half the ceiling and the ceiling, capped at max', () => {
  assert.equal(
    backoffDelay(1, 250, 2000, () => 0),
    125,
  );
  assert.equal(
    backoffDelay(1, 250, 2000, () => 0.999999),
    250,
  );
  assert.equal(
    backoffDelay(2, 250, 2000, () => 0),
    250,
  );
  assert.equal(
    backoffDelay(5, 250, 2000, () => 0.999999),
    2000,
  );
  assert.equal(
    backoffDelay(9, 250, 2000, () => 0),
    1000,
  );
});

test('withBackoff retries transient errors three times and stops on permanent ones', async () => {
  const delays: number[] = [];
  let calls = 0;
  const r = await withBackoff(async () => (calls++, err(sandboxError('unavailable', 'x'))), {
    sleep: async (ms) => void delays.push(ms),
  });
  assert.equal(calls, 3);
  assert.equal(delays.length, 2);
  assert.equal(r.ok, false);
  calls = 0;
  await withBackoff(async () => (calls++, err(sandboxError('not_found'))), { sleep: async () => {} });
  assert.equal(calls, 1);
  calls = 0;
  const good = await withBackoff(async () => (++calls < 2 ? err(sandboxError('rate_limited')) : ok(7)), {
    sleep: async () => {},
  });
  assert.deepEqual(good, ok(7));
  let thrown = 0;
  await assert.rejects(
    withBackoff(
      async () => {
        thrown++;
        throw new Error('boom');
      },
      { sleep: async () => {} },
    ),
    /boom/,
  );
  assert.equal(thrown, 3);
});

test('hosted names are fountain-<8>-<8 hex>; an override is only a suffix', () => {
  const r = mintHostedName('0123456789abcdef');
  assert.ok(r.ok && /^fountain-01234567-[0-9a-f]{8}$/.test(r.value));
  assert.deepEqual(mintHostedName('0123456789', 'fountain-01234567-mine'), ok('fountain-01234567-mine'));
  assert.deepEqual(mintHostedName('0123456789', 'mine'), ok('fountain-01234567-mine'));
  assert.deepEqual(mintHostedName('0123456789', '../x'), err('invalid_sprite_name'));
});

test('runner names carry the runner id and parse back to it', () => {
  const id = '0f0e0d0c-0b0a-4908-8706-050403020100';
  const r = mintRunnerName(id);
  assert.ok(r.ok);
  assert.equal(r.value.length, 48);
  assert.deepEqual(parseRunnerName(r.value), ok(id));
  assert.deepEqual(parseRunnerName('fountain-01234567-abcdef01'), err('not_a_runner_sandbox_name'));
  assert.deepEqual(mintRunnerName('nope'), err('invalid_runner_id'));
});

test('a Private value never shows in inspect, JSON or strings', () => {
  const handle = { provider: 'fake', name: 'n', private: new Private({ token: 'sekrit-123' }) };
  assert.doesNotMatch(inspect(handle, { depth: 10 }), /sekrit/);
  assert.doesNotMatch(JSON.stringify(handle), /sekrit/);
  assert.doesNotMatch(`${handle.private}`, /sekrit/);
  assert.equal(handle.private.reveal().token, 'sekrit-123');
});

test('idle action and lifecycle checks', () => {
  assert.equal(idleAction(new Set(['suspend'])), 'suspend');
  assert.equal(idleAction(new Set()), 'destroy');
  const t0 = new Date(0);
  const limits = { idleTimeoutMs: 1000, maxLifetimeMs: 5000 };
  assert.deepEqual(checkLifecycle(limits, t0, t0, false, new Date(999)), { kind: 'ok' });
  assert.deepEqual(checkLifecycle(limits, t0, t0, false, new Date(1000)), { kind: 'expired', reason: 'idle' });
  assert.deepEqual(checkLifecycle(limits, t0, t0, true, new Date(1000)), { kind: 'ok' });
  assert.deepEqual(checkLifecycle(limits, t0, t0, true, new Date(5000)), { kind: 'expired', reason: 'max_lifetime' });
  assert.deepEqual(checkLifecycle({ idleTimeoutMs: 0, maxLifetimeMs: null }, t0, t0, false, new Date(1e9)), {
    kind: 'ok',
  });
});

test('a provider is switched on by its credential; blank equals unset', () => {
  assert.equal(credentialPresent('runner', {}), true);
  assert.equal(credentialPresent('runner', { SANDBOX_RUNNERS_ENABLED: 'false' }), false);
  assert.equal(credentialPresent('e2b', { E2B_API_KEY: '  ' }), false);
  assert.equal(credentialPresent('e2b', { E2B_API_KEY: 'k' }), true);
  assert.equal(credentialPresent('sprites', { SPRITES_TOKEN: 't' }), true);
});
