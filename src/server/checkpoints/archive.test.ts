import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { checkArchive, insideRoot } from './archive.ts';

type Entry = {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device';
  body?: string;
  linkname?: string;
};

async function tgz(entries: Entry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const done = new Promise<void>((r) => p.on('end', () => r()));
  for (const e of entries) {
    const { body, ...header } = e;
    if (body === undefined) p.entry(header);
    else p.entry(header, body);
  }
  p.finalize();
  await done;
  return gzipSync(Buffer.concat(chunks));
}

describe('checkpoint archives are checked before they reach a sandbox', () => {
  it('accepts files, folders and links that stay inside, and counts them', async () => {
    const r = await checkArchive(
      await tgz([
        { name: './', type: 'directory' },
        { name: './.claude/projects/x.jsonl', body: '{"a":1}\n' },
        { name: './work/link', type: 'symlink', linkname: '../.claude/projects/x.jsonl' },
        { name: './work/hard', type: 'link', linkname: './.claude/projects/x.jsonl' },
      ]),
      { maxBytes: 1000 },
    );
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.value, { files: 1, directories: 1, links: 2, bytes: 8 });
  });

  for (const [what, entries, code] of [
    ['an absolute path', [{ name: '/etc/passwd', body: 'x' }], 'escapes'],
    ['a path up and out', [{ name: './a/../../outside', body: 'x' }], 'escapes'],
    ['a symlink to an absolute target', [{ name: './l', type: 'symlink', linkname: '/etc' }], 'escapes'],
    ['a symlink that climbs out', [{ name: './a/l', type: 'symlink', linkname: '../../x' }], 'escapes'],
    ['a hard link out', [{ name: './h', type: 'link', linkname: '../x' }], 'escapes'],
    ['a fifo', [{ name: './f', type: 'fifo' }], 'unsupported_entry'],
    ['a device', [{ name: './d', type: 'character-device' }], 'unsupported_entry'],
    ['more than the limit once unpacked', [{ name: './big', body: 'y'.repeat(2000) }], 'too_large'],
  ] as Array<[string, Entry[], string]>) {
    it(`refuses ${what}`, async () => {
      const r = await checkArchive(await tgz(entries), { maxBytes: 1000 });
      assert.ok(!r.ok);
      assert.equal(r.error.code, code, r.error.message);
    });
  }

  it('refuses a truncated, a non-gzip and an empty archive', async () => {
    const whole = await tgz([{ name: './a', body: 'hello'.repeat(100) }]);
    for (const bad of [whole.subarray(0, whole.length - 30), Buffer.from('not an archive'), Buffer.alloc(0)]) {
      const r = await checkArchive(bad, { maxBytes: 10_000 });
      assert.ok(!r.ok);
      assert.equal(r.error.code, 'corrupt');
    }
  });

  it('places names relative to the root', () => {
    assert.equal(insideRoot('./a/b/'), 'a/b');
    assert.equal(insideRoot('.'), '.');
    assert.equal(insideRoot('a/../b'), 'b');
    assert.equal(insideRoot('a/../../b'), null);
    assert.equal(insideRoot('/a'), null);
  });
});
