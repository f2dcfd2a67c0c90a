import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { statusFileWriter, statusHealthy } from './status-file.ts';

const silent = pino({ level: 'silent' });

describe('the runner status file', () => {
  it('starts disconnected, follows the link, and leaves no temporary file behind', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-status-'));
    try {
      const path = join(dir, 'nested', 'status.json');
      let clock = new Date('2026-01-01T00:00:00.000Z');
      const link = statusFileWriter(path, silent, () => clock);
      const read = () => JSON.parse(readFileSync(path, 'utf8'));
      assert.deepEqual(read(), { state: 'disconnected', at: '2026-01-01T00:00:00.000Z', pid: process.pid });
      clock = new Date('2026-01-01T00:00:10.000Z');
      link(true);
      assert.equal(read().state, 'connected');
      assert.equal(read().at, '2026-01-01T00:00:10.000Z');
      assert.equal(statusHealthy(readFileSync(path, 'utf8'), 45_000, new Date('2026-01-01T00:00:30.000Z')), true);
      link(false);
      assert.equal(statusHealthy(readFileSync(path, 'utf8'), 45_000, new Date('2026-01-01T00:00:11.000Z')), false);
      assert.deepEqual(readdirSync(join(dir, 'nested')), ['status.json']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is healthy only when connected with a recent heartbeat, and never for what it cannot read', () => {
    const now = new Date('2026-01-01T00:01:00.000Z');
    const at = (s: string) => JSON.stringify({ state: 'connected', at: s, pid: 7 });
    assert.equal(statusHealthy(at('2026-01-01T00:00:30.000Z'), 45_000, now), true);
    assert.equal(statusHealthy(at('2026-01-01T00:00:10.000Z'), 45_000, now), false, 'a stale heartbeat');
    assert.equal(
      statusHealthy(JSON.stringify({ state: 'disconnected', at: now.toISOString(), pid: 7 }), 45_000, now),
      false,
    );
    for (const bad of [
      '',
      '{',
      'null',
      '[]',
      '{"state":"connected"}',
      JSON.stringify({ state: 'up', at: now, pid: 7 }),
    ])
      assert.equal(statusHealthy(bad, 45_000, now), false, bad);
  });

  it('keeps the daemon going when the file cannot be written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-status-'));
    try {
      // A regular file where the directory should be: no user, root included, can write beneath it.
      writeFileSync(join(dir, 'file'), '');
      const link = statusFileWriter(join(dir, 'file', 'status.json'), silent);
      assert.doesNotThrow(() => link(true));
      assert.deepEqual(readdirSync(dir), ['file']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
