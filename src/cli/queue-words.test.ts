import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inLine, ordinal } from './queue-words.ts';

test('ordinals and the place in line read as English', () => {
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal), [
    '1st',
    '2nd',
    '3rd',
    '4th',
    '11th',
    '12th',
    '13th',
    '21st',
    '22nd',
    '101st',
    '111th',
  ]);
  assert.equal(inLine(2), 'queued — 2nd in line');
});
