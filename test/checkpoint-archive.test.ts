/**
 * A checkpoint's archive through a real runner (process backend): taken from one sandbox with the
 * contract's exec only, checked, put into a fresh sandbox with writeFile and exec; dependency folders
 * and HOME's secrets file stay behind; a refused archive writes nothing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { RunnerAdapter, acceptRunnerSocket } from '../src/providers/runner/index.ts';
import type { Handle } from '../src/sandbox/index.ts';
import { mintRunnerName } from '../src/sandbox/index.ts';
import { captureArchive, DEFAULT_SPEC, restoreArchive } from '../src/server/checkpoints/sandbox-archive.ts';
import { type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { findOwner } from '../src/server/account/store.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';

const SPEC = { ...DEFAULT_SPEC, home: '/home/sprite' };

describe('checkpoint archives through a real runner', () => {
  let tmp: string;
  let srv: RunningServer;
  let runner: RunnerChild;
  let adapter: RunnerAdapter;
  let runnerId: string;
  const root = () => join(tmp, 'sandboxes');

  const sandbox = async (): Promise<{ handle: Handle; dir: string }> => {
    const name = mintRunnerName(runnerId);
    assert.ok(name.ok);
    const h = await adapter.lifecycle.create(name.value);
    assert.ok(h.ok, JSON.stringify(h));
    return { handle: h.value, dir: join(root(), name.value) };
  };
  const sh = async (h: Handle, script: string) => {
    const r = await adapter.processes.exec(h, 'sh', ['-c', script], { dir: '/home/sprite' });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.exitCode, 0, Buffer.from(r.value.output).toString());
    return Buffer.from(r.value.output).toString();
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ckpt-')));
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, acceptRunnerSocket });
    runner = startRunnerChild({ name: 'c', root: root(), baseUrl: srv.url, apiKey: srv.bootstrapKey!, home: tmp });
    const owner = (await findOwner(srv.database.db))!;
    runnerId = (await until(() => srv.host.online(owner.id)[0], 'the runner online', 60_000)).runnerId;
    adapter = new RunnerAdapter(srv.host);
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('carries HOME (session files, a repository with uncommitted work, links) into a fresh sandbox, without what is excluded', async () => {
    const a = await sandbox();
    await sh(
      a.handle,
      [
        'set -e',
        'mkdir -p .claude/projects/p work/node_modules/dep .cache',
        'echo \'{"fact":"the launch code is 0451"}\' > .claude/projects/p/session.jsonl',
        'cd work && git init -q && git -c user.email=t@t -c user.name=t commit -q --allow-empty -m first && echo draft > notes.txt && cd ..',
        'echo dependency > work/node_modules/dep/index.js',
        'echo cached > .cache/blob',
        "echo SECRET='s3cr3t' > .env",
        'echo keep > work/.env',
        'ln -s ../.claude/projects/p/session.jsonl work/session-link',
        // A fifo the agent left, and a provider's command state: neither travels (a restore refuses fifos).
        'mkfifo work/pipe',
        // Links a restore refuses: an absolute target (an installer's, on a runner) and one climbing out of HOME.
        'ln -s /etc/hostname work/abs-link',
        'ln -s ../../outside work/climb',
        'mkdir -p .fountain/sessions/s1 && echo 0 > .fountain/sessions/s1/exit',
      ].join('\n'),
    );
    const taken = await captureArchive(adapter, a.handle, SPEC);
    assert.ok(taken.ok, JSON.stringify(taken));
    assert.ok(!taken.value.includes(Buffer.from('s3cr3t')), 'not in the compressed bytes either (sanity)');
    assert.deepEqual(
      readdirSync(a.dir).filter((f) => f.startsWith('.fountain-checkpoint')),
      [],
      'no working file is left behind',
    );

    const b = await sandbox();
    const restored = await restoreArchive(adapter, b.handle, SPEC, taken.value);
    assert.ok(restored.ok, JSON.stringify(restored));
    assert.match(readFileSync(join(b.dir, '.claude/projects/p/session.jsonl'), 'utf8'), /0451/);
    assert.equal(readFileSync(join(b.dir, 'work/notes.txt'), 'utf8'), 'draft\n');
    assert.equal(readFileSync(join(b.dir, 'work/.env'), 'utf8'), 'keep\n', "a project's .env is work, and travels");
    assert.equal(readlinkSync(join(b.dir, 'work/session-link')), '../.claude/projects/p/session.jsonl');
    const git = await sh(b.handle, 'cd work && git log --oneline && git status --short');
    assert.match(git, /^[0-9a-f]+ first\n/, 'the commit travels');
    assert.match(git, /^\?\? notes\.txt$/m, 'and the uncommitted file');
    for (const gone of [
      'work/node_modules',
      '.cache',
      '.env',
      '.fountain-restore.tgz',
      'work/pipe',
      '.fountain/sessions',
    ])
      assert.ok(!existsSync(join(b.dir, gone)), `${gone} is not restored`);
  });

  it('refuses an archive that escapes, writing nothing into the sandbox', async () => {
    const b = await sandbox();
    // A tar with one entry named ../escaped: a 512-byte header (name, mode, size 0, checksum) and two zero blocks.
    const header = Buffer.alloc(512);
    header.write('../escaped', 0);
    header.write('0000644\0', 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write('00000000000\0', 124);
    header.write('00000000000\0', 136);
    header.write('        ', 148);
    header.write('0', 156);
    header.write('ustar\0', 257);
    header.write('00', 263);
    let sum = 0;
    for (const byte of header) sum += byte;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    const evil = gzipSync(Buffer.concat([header, Buffer.alloc(1024)]));
    const r = await restoreArchive(adapter, b.handle, SPEC, evil);
    assert.ok(!r.ok);
    assert.equal(r.error.code, 'escapes');
    assert.ok(!existsSync(join(b.dir, '.fountain-restore.tgz')));
    assert.ok(!existsSync(join(root(), 'escaped')));
  });
});
