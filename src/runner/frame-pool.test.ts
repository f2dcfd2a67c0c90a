import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FramePool } from './frame-pool.ts';

test('a buffer handed back is handed out again for a frame of its size class, not for a larger one', () => {
  const pool = new FramePool();
  const a = pool.take(87_000);
  assert.ok(a.length >= 87_000);
  pool.give(a);
  assert.equal(pool.spareBytes, a.length);
  assert.equal(pool.take(100_000), a, 'same class: reused');
  assert.equal(pool.spareBytes, 0);
  pool.give(a);
  const big = pool.take(1_400_000);
  assert.notEqual(big, a);
  assert.ok(big.length >= 1_400_000);
});

test('spare buffers are capped; a buffer that is not from take() is never kept', () => {
  const pool = new FramePool();
  const taken = Array.from({ length: 10 }, () => pool.take(1_400_000));
  for (const b of taken) pool.give(b);
  assert.ok(pool.spareBytes <= 8 * 1024 * 1024);
  const other = new FramePool();
  other.give(Buffer.alloc(1000));
  assert.equal(other.spareBytes, 0);
});
