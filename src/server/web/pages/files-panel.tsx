/**
 * The conversation page's "Files changed" panel: every file the agent's finished edit tool calls changed,
 * with added and removed line counts, each opening to its edits as unified diffs. Paths are shown inside
 * the sandbox (relative to its home), never as the runner's host path.
 */
import { diffLines } from '../../../acp/diff-lines.ts';
import type { ToolContent, ToolView } from '../../../acp/tool-view.ts';
import type { ConversationView } from '../../conversations/views.ts';
import { DiffView } from '../event-view.tsx';

/** Where a sandbox's home is, for a hosted provider; a runner's is its host directory. */
const SANDBOX_HOME = '/home/sprite';

type Diff = Extract<ToolContent, { type: 'diff' }>;

export interface FileChange {
  /** As the reader knows it: relative to the sandbox's home where it lies under it. */
  readonly path: string;
  readonly edits: readonly Diff[];
  readonly added: number;
  readonly removed: number;
}

/** A path as seen inside the sandbox: under its home → relative; elsewhere → as the agent named it. */
export function sandboxPath(path: string, conv: Pick<ConversationView, 'sandbox'>): string {
  // `~` too: the conversation page's reader already shows the host directory as the home.
  for (const home of [conv.sandbox?.runner?.path, SANDBOX_HOME, '~']) {
    if (home && path.startsWith(`${home}/`)) return path.slice(home.length + 1);
  }
  return path;
}

/**
 * The files changed by completed tool calls, in the order first changed. A call's diffs are taken as it
 * stands at the end (a runtime may replace a proposed edit's snippet with the whole file once it ran);
 * a refused, failed or still running edit changed nothing.
 */
export function fileChanges(tools: Iterable<ToolView>, conv: Pick<ConversationView, 'sandbox'>): FileChange[] {
  const byPath = new Map<string, { edits: Diff[]; added: number; removed: number }>();
  for (const t of tools) {
    if (t.status !== 'completed') continue;
    for (const c of t.content) {
      if (c.type !== 'diff') continue;
      const path = sandboxPath(c.path, conv);
      const f = byPath.get(path) ?? { edits: [], added: 0, removed: 0 };
      for (const l of diffLines(c)) {
        if (l.type === 'add') f.added++;
        else if (l.type === 'del') f.removed++;
      }
      f.edits.push({ ...c, path });
      byPath.set(path, f);
    }
  }
  return [...byPath].map(([path, f]) => ({ path, ...f }));
}

/** The panel; hidden while nothing changed, so the live stream can fill it in place (`oob`). */
export function FilesPanel(p: { files: readonly FileChange[]; oob?: boolean }) {
  const oob = p.oob ? 'true' : undefined;
  if (p.files.length === 0) return <section id="files" class="card files-panel" hidden hx-swap-oob={oob} />;
  const added = p.files.reduce((n, f) => n + f.added, 0);
  const removed = p.files.reduce((n, f) => n + f.removed, 0);
  return (
    <section id="files" class="card files-panel" aria-label="Files changed" hx-swap-oob={oob}>
      <h2 class="small">
        Files changed ({p.files.length}) <span class="count-add">+{added}</span>{' '}
        <span class="count-del">−{removed}</span>
      </h2>
      <ul class="plain">
        {p.files.map((f) => (
          <li>
            <details class="file-change" data-file={f.path}>
              <summary>
                <code>{f.path}</code> <span class="count-add">+{f.added}</span>{' '}
                <span class="count-del">−{f.removed}</span>
                <span class="muted small"> · {f.edits.length === 1 ? '1 edit' : `${f.edits.length} edits`}</span>
              </summary>
              {f.edits.map((d) => (
                <DiffView diff={d} />
              ))}
            </details>
          </li>
        ))}
      </ul>
    </section>
  );
}
