import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Session } from '../../sandbox/index.ts';
import { engineConfigFromEnv } from './config.ts';
import { permissionRemainingMs, pickSession, runningSessionsOf, storedOptions } from './recovery.ts';

const CONV = '11111111-2222-4333-8444-555555555555';
const OTHER = '99999999-2222-4333-8444-555555555555';
const session = (id: string, conv: string, createdAt: string, exitCode?: number): Session => ({
  id,
  command: `sh -c exec "$@" fountain-conv-${conv} node /x/bin/fountain.js demo-agent`,
  createdAt: new Date(createdAt),
  lastActivityAt: null,
  tty: false,
  ...(exitCode === undefined ? {} : { exitCode }),
});

describe('pickSession', () => {
  const list = [
    session('s-3', OTHER, '2024-01-03T00:00:00Z'),
    session('s-2', CONV, '2024-01-02T00:00:00Z'),
    session('s-1', CONV, '2024-01-01T00:00:00Z'),
    session('s-0', CONV, '2023-12-31T00:00:00Z', 0),
  ];

  it('prefers the stored session id; the others of the conversation still running are superseded', () => {
    const p = pickSession(list, CONV, 's-1');
    assert.equal(p?.session.id, 's-1');
    assert.equal(p?.matchedBy, 'session_id');
    assert.deepEqual(
      p?.superseded.map((s) => s.id),
      ['s-2'],
    );
  });

  it('without a stored id (or a stale one) takes the newest tagged session, never the list head', () => {
    for (const stored of [null, 's-gone']) {
      const p = pickSession(list, CONV, stored);
      assert.equal(p?.session.id, 's-2');
      assert.equal(p?.matchedBy, 'tag');
      assert.deepEqual(
        p?.superseded.map((s) => s.id),
        ['s-1'],
      );
    }
  });

  it('finds nothing for a conversation without sessions, and matches the tag as a whole word', () => {
    assert.equal(pickSession(list, '11111111-2222-4333-8444-000000000000', null), null);
    assert.equal(pickSession([session('s-9', `${CONV}0`, '2024-01-01T00:00:00Z')], CONV, null), null);
    assert.deepEqual(
      runningSessionsOf(list, CONV).map((s) => s.id),
      ['s-2', 's-1'],
    );
  });
});

describe('permission deadline on restore', () => {
  const pending = (asked_at: string) => ({
    request_id: 'r',
    acp_id: 7,
    tool: 'Run',
    kind: 'execute',
    options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }],
    asked_at,
  });
  const now = Date.parse('2024-01-01T00:05:00Z');

  it('keeps the original deadline: what is left of the ask timeout, never more, never below zero', () => {
    assert.equal(permissionRemainingMs(pending('2024-01-01T00:04:00Z'), 300_000, now), 240_000);
    assert.equal(permissionRemainingMs(pending('2024-01-01T00:00:00Z'), 300_000, now), 0);
    assert.equal(permissionRemainingMs(pending('2023-12-31T00:00:00Z'), 300_000, now), 0);
  });

  it('an unreadable asked_at leaves nothing (denied at once)', () => {
    assert.equal(permissionRemainingMs(pending('yesterday-ish'), 300_000, now), 0);
    assert.equal(permissionRemainingMs(pending(''), 300_000, now), 0);
  });

  it('restores the options in ACP shape', () => {
    assert.deepEqual(storedOptions(pending('2024-01-01T00:04:00Z')), [
      { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
    ]);
  });
});

describe('FOUNTAIN_RUNNER_RECOVERY_SECONDS', () => {
  it('defaults to 120 s, retries every second, gives the replay 10 s to reach its boundary', () => {
    const c = engineConfigFromEnv({});
    assert.ok(c.ok);
    assert.deepEqual(
      [c.value.recoveryWindowMs, c.value.recoveryRetryMs, c.value.replayBoundaryTimeoutMs],
      [120_000, 1_000, 10_000],
    );
  });
  it('is read in seconds and refused when not a whole positive number', () => {
    const c = engineConfigFromEnv({ FOUNTAIN_RUNNER_RECOVERY_SECONDS: '30' });
    assert.ok(c.ok && c.value.recoveryWindowMs === 30_000);
    for (const bad of ['0', '-1', '1.5', 'soon']) {
      const r = engineConfigFromEnv({ FOUNTAIN_RUNNER_RECOVERY_SECONDS: bad });
      assert.ok(!r.ok && /FOUNTAIN_RUNNER_RECOVERY_SECONDS/.test(r.message), bad);
    }
  });
});
