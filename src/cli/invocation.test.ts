import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fountainCommand } from './invocation.ts';

describe('fountainCommand', () => {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-invocation-')));
  const checkout = join(tmp, 'checkout');
  const bin = join(checkout, 'bin', 'fountain.js');
  mkdirSync(join(checkout, 'bin'), { recursive: true });
  mkdirSync(join(checkout, 'src'), { recursive: true });
  writeFileSync(bin, '');
  const pathDir = join(tmp, 'path');
  mkdirSync(pathDir);
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('says `npx fountain` only inside the checkout', () => {
    assert.equal(fountainCommand(join(checkout, 'src'), { PATH: '' }, bin), 'npx fountain');
    assert.equal(fountainCommand(tmp, { PATH: '' }, bin), `node ${bin}`);
  });

  it('says `fountain` when PATH finds this installation, and not another one', () => {
    const other = join(tmp, 'other');
    mkdirSync(other);
    writeFileSync(join(other, 'fountain'), '');
    assert.equal(fountainCommand(tmp, { PATH: other }, bin), `node ${bin}`);
    symlinkSync(bin, join(pathDir, 'fountain'));
    assert.equal(fountainCommand(tmp, { PATH: `${other}:${pathDir}` }, bin), 'fountain');
  });

  it('quotes a path the shell would split', () => {
    assert.equal(
      fountainCommand('/', { PATH: '' }, '/opt/my fountain/bin/fountain.js'),
      "node '/opt/my fountain/bin/fountain.js'",
    );
  });
});
