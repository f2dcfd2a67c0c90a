/**
 * An edit (a tool call's `diff` content) as unified-diff lines, for the web UI and the CLI. Its own
 * module so the diff library loads with what renders an edit, not with every module that folds tool calls.
 */
import { structuredPatch } from 'diff';
import type { ToolContent } from './tool-view.ts';

/** One line of an edit shown as a unified diff: a hunk header, context, removed or added. */
export interface DiffLine {
  readonly type: 'hunk' | 'context' | 'del' | 'add';
  readonly text: string;
}

/** An edit as unified-diff lines (three lines of context); a new file (no old text) is all additions. */
export function diffLines(d: Extract<ToolContent, { type: 'diff' }>): DiffLine[] {
  const patch = structuredPatch(d.path, d.path, d.old_text ?? '', d.new_text, '', '', { context: 3 });
  const out: DiffLine[] = [];
  for (const h of patch.hunks) {
    out.push({ type: 'hunk', text: `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@` });
    for (const l of h.lines) {
      if (l.startsWith('\\')) continue;
      out.push({ type: l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : 'context', text: l });
    }
  }
  return out;
}
