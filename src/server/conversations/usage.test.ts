import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { turnUsage } from './usage.ts';

describe('turn usage', () => {
  it('takes tokens from the reply and the context window and cost from the last usage_update', () => {
    assert.deepEqual(
      turnUsage(
        { inputTokens: 12, outputTokens: 30, cachedReadTokens: 4, cachedWriteTokens: 0, totalTokens: 46 },
        { context: { used: 46, size: 200_000 }, cost: { amount: 0.0012, currency: 'USD' } },
      ),
      {
        input: 12,
        output: 30,
        cache_read: 4,
        cache_write: 0,
        context: { used: 46, size: 200_000 },
        cost: { amount: 0.0012, currency: 'USD' },
      },
    );
  });
  it('records a usage_update alone with zero tokens, and nothing when the agent reported nothing', () => {
    assert.deepEqual(turnUsage(undefined, { context: { used: 5, size: 10 } }), {
      input: 0,
      output: 0,
      context: { used: 5, size: 10 },
    });
    assert.equal(turnUsage(undefined, {}), null);
  });
});
