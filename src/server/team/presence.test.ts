import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { presenceOf, type PresenceInput } from './presence.ts';

const runner = (status: 'pending' | 'starting' | 'ready' | 'suspended' | 'terminated' | 'failed') => ({
  provider: 'runner',
  status,
});
const e2b = (status: 'pending' | 'starting' | 'ready' | 'suspended' | 'terminated' | 'failed') => ({
  provider: 'e2b',
  status,
});

describe('presence', () => {
  it('follows the reference table, first matching row wins', () => {
    const cases: Array<[PresenceInput, string, string]> = [
      [{ status: 'running', sandbox: runner('ready'), runnerOnline: false }, 'working', 'working'],
      [{ status: 'pending', sandbox: e2b('ready'), runnerOnline: false }, 'online', 'ready · waiting for a turn'],
      [{ status: 'pending', sandbox: e2b('starting'), runnerOnline: false }, 'starting', 'starting computer'],
      [
        { status: 'idle', sandbox: runner('ready'), runnerOnline: false },
        'machine_offline',
        'machine offline · wakes when the runner reconnects',
      ],
      [
        { status: 'idle', sandbox: runner('suspended'), runnerOnline: false },
        'machine_offline',
        'machine offline · wakes when the runner reconnects',
      ],
      [{ status: 'idle', sandbox: runner('ready'), runnerOnline: true }, 'online', 'online'],
      [{ status: 'idle', sandbox: e2b('starting'), runnerOnline: false }, 'online', 'online'],
      [{ status: 'idle', sandbox: runner('suspended'), runnerOnline: true }, 'asleep', 'asleep · wakes on message'],
      [{ status: 'idle', sandbox: e2b('terminated'), runnerOnline: false }, 'away', 'away · wakes on message'],
      [{ status: 'idle', sandbox: null, runnerOnline: false }, 'away', 'away · wakes on message'],
      [{ status: 'failed', sandbox: runner('failed'), runnerOnline: true }, 'failed', 'offline · failed'],
      [
        { status: 'terminated', sandbox: runner('terminated'), runnerOnline: true },
        'offline',
        'offline · new computer on message',
      ],
    ];
    for (const [input, state, label] of cases) {
      assert.deepEqual(presenceOf(input), { state, label }, JSON.stringify(input));
    }
  });
});
