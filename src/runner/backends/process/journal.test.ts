import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Journal } from './journal.ts';
import type { JournalRecord } from './journal.ts';

/** Every record a reader yields, payloads copied out at once (what a reused buffer demands). */
async function readAll(journal: Journal, reuse: boolean): Promise<Array<[string, Buffer]>> {
  const reader = journal.reader();
  const out: Array<[string, Buffer]> = [];
  const take = (records: readonly JournalRecord[]) => {
    for (const r of records) out.push([r.kind, Buffer.from(r.payload)]);
  };
  try {
    while (reader.pending() > 100_000) take(await reader.next(reuse));
    take(reader.rest());
  } finally {
    reader.close();
  }
  return out;
}

describe('journal reader', () => {
  it('yields the same records reading into one reused buffer as into fresh ones, records split between reads included', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-journal-'));
    try {
      const journal = new Journal(dir, { capBytes: 64 * 1024 * 1024, segmentBytes: 3 * 1024 * 1024 });
      const written: Array<[string, Buffer]> = [];
      // Sizes that never line up with the 1 MiB reads, across segment files; one record larger than a read.
      for (let i = 0, size = 1; i < 160; i++, size = (size * 7919 + 13) % (70 * 1024)) {
        const payload = Buffer.alloc(i === 80 ? 1536 * 1024 : size + 1, i);
        const kind = i % 5 === 4 ? 'stderr' : 'stdout';
        journal.append(kind, payload);
        written.push([kind, payload]);
      }
      const fresh = await readAll(journal, false);
      const reused = await readAll(journal, true);
      assert.equal(fresh.length, written.length);
      assert.deepEqual(reused, written);
      assert.deepEqual(fresh, written);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
