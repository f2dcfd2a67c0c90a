/**
 * The Sprites spawn shim run by a real `sh` here: an env that arrives as its first stdin line reaches the
 * command exactly (quotes, newlines, `$`), stdin after it is the command's, and no value is in an argv.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { displayCommand, envLine, newJournalKey, shimArgv } from './shim.ts';

const tricky = 'it\'s a "value" with $HOME, `x` and\na newline';

test('shim: the env line reaches the command exactly, stdin follows it, and no argv holds a value', () => {
  const home = mkdtempSync(join(tmpdir(), 'sprites-shim-'));
  try {
    const line = envLine([
      ['TOKEN', tricky],
      ['OTHER', 'two'],
    ]);
    assert.ok(line.ok && line.value !== null);
    const key = newJournalKey();
    const argv = shimArgv(key, ['sh', '-c', 'printf "%s|%s|" "$TOKEN" "$OTHER"; cat'], 'env');
    assert.ok(!argv.some((a) => a.includes('two') || a.includes('newline')), 'no value in the argv');
    const r = spawnSync(argv[0]!, argv.slice(1), {
      input: `${line.value}after\n`,
      env: { PATH: process.env.PATH, HOME: home },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `${tricky}|two|after\n`);
    assert.equal(displayCommand(argv.join(' ')), 'sh -c printf "%s|%s|" "$TOKEN" "$OTHER"; cat');

    const only = shimArgv(newJournalKey(), ['sh', '-c', 'printf %s "$OTHER"; cat'], 'env-only');
    const r2 = spawnSync(only[0]!, only.slice(1), {
      input: `${line.value}not for the command\n`,
      env: { PATH: process.env.PATH, HOME: home },
      encoding: 'utf8',
    });
    assert.equal(r2.stdout, 'two', 'env-only: the command gets no stdin');
    assert.equal(envLine([['bad-name', 'x']]).ok, false);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
