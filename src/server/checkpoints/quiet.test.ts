import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { QuietWait } from './quiet.ts';

describe('QuietWait: a checkpoint waits for its conversation to be quiet', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  it('runs a burst of pushes once, after the burst, with the last value', () => {
    const ran: Array<[string, number]> = [];
    const q = new QuietWait<number>(1_000, (k, v) => ran.push([k, v]));
    q.push('a', 1);
    mock.timers.tick(900);
    q.push('a', 2);
    mock.timers.tick(900);
    q.push('a', 3);
    mock.timers.tick(999);
    assert.deepEqual(ran, [], 'nothing runs while pushes keep coming');
    mock.timers.tick(1);
    assert.deepEqual(ran, [['a', 3]]);
    mock.timers.tick(10_000);
    assert.deepEqual(ran, [['a', 3]], 'once');
  });

  it('keeps keys apart, drops a cancelled one, and flushes the rest now', () => {
    const ran: Array<[string, number]> = [];
    const q = new QuietWait<number>(1_000, (k, v) => ran.push([k, v]));
    q.push('a', 1);
    q.push('b', 2);
    q.push('c', 3);
    q.cancel('b');
    q.flush();
    assert.deepEqual(ran, [
      ['a', 1],
      ['c', 3],
    ]);
    mock.timers.tick(5_000);
    assert.equal(ran.length, 2, 'a flushed job does not run again when its time comes');
  });
});
