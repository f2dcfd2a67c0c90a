import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { claudeRelocate, claudeSessionsOf, codexRelocate, geminiRelocate } from './relocate.ts';

/** Each script run by a real `sh` in a HOME laid out as the runtime leaves it. */
describe('sessions filed under the old path are found from the new one after a restore', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-relocate-')));
  after(() => rmSync(root, { recursive: true, force: true }));
  const home = (name: string) => {
    const h = join(root, name);
    mkdirSync(h, { recursive: true });
    return h;
  };
  const put = (path: string, text: string) => {
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
  };
  const run = (h: string, script: string) => execFileSync('sh', ['-c', script], { cwd: h, encoding: 'utf8' });
  const from = '/old/runner/sandbox';
  const to = "/new/runner's sandbox";

  it("claude: the old path's project folder moves to the new path's", () => {
    const h = home('claude');
    put(join(h, claudeSessionsOf(from), 's1.jsonl'), 'turn 1');
    run(h, claudeRelocate(from, to));
    assert.equal(readFileSync(join(h, claudeSessionsOf(to), 's1.jsonl'), 'utf8'), 'turn 1');
    assert.ok(!existsSync(join(h, claudeSessionsOf(from))));
  });

  it('gemini: the folders the old path owned are owned by the new path; others stay', () => {
    const h = home('gemini');
    const ws = `${from}/gemini-workspace`;
    put(join(h, '.gemini/tmp/gemini-workspace/.project_root'), ws);
    put(join(h, '.gemini/tmp/gemini-workspace/chats/session-1.json'), '{}');
    put(join(h, '.gemini/history/gemini-workspace/.project_root'), ws);
    put(join(h, '.gemini/tmp/other/.project_root'), '/elsewhere');
    run(h, geminiRelocate(ws, `${to}/gemini-workspace`));
    for (const d of ['tmp', 'history'])
      assert.equal(
        readFileSync(join(h, `.gemini/${d}/gemini-workspace/.project_root`), 'utf8'),
        `${to}/gemini-workspace`,
      );
    assert.equal(readFileSync(join(h, '.gemini/tmp/other/.project_root'), 'utf8'), '/elsewhere');
    assert.ok(existsSync(join(h, '.gemini/tmp/gemini-workspace/chats/session-1.json')));
    // A HOME with no gemini folders is not an error.
    run(home('empty'), geminiRelocate(ws, to));
  });

  it('codex: the state database goes, the rollout files stay', () => {
    const h = home('codex');
    for (const f of ['state_5.sqlite', 'state_5.sqlite-wal', 'state_5.sqlite-shm', 'logs_2.sqlite'])
      put(join(h, '.codex', f), 'x');
    put(join(h, '.codex/sessions/2026/12/05/rollout-1.jsonl'), '{}');
    run(h, codexRelocate());
    assert.ok(!existsSync(join(h, '.codex/state_5.sqlite')));
    assert.ok(!existsSync(join(h, '.codex/state_5.sqlite-wal')));
    assert.ok(existsSync(join(h, '.codex/logs_2.sqlite')));
    assert.ok(existsSync(join(h, '.codex/sessions/2026/12/05/rollout-1.jsonl')));
  });
});
