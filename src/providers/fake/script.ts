/**
 * The fake adapter's script vocabulary: each argument is one instruction —
 * `out:<data>`, `err:<data>`, `exit:<n>`, `stay`, `drop`; anything else is ignored.
 */
export type Instruction =
  | { readonly kind: 'out'; readonly data: string }
  | { readonly kind: 'err'; readonly data: string }
  | { readonly kind: 'exit'; readonly code: number }
  | { readonly kind: 'stay' }
  | { readonly kind: 'drop' };

export const parseInstruction = (arg: string): Instruction | null => {
  if (arg.startsWith('out:')) return { kind: 'out', data: arg.slice(4) };
  if (arg.startsWith('err:')) return { kind: 'err', data: arg.slice(4) };
  if (arg.startsWith('exit:')) {
    const code = Number(arg.slice(5));
    return Number.isInteger(code) ? { kind: 'exit', code } : null;
  }
  if (arg === 'stay') return { kind: 'stay' };
  if (arg === 'drop') return { kind: 'drop' };
  return null;
};

export const parseScript = (args: readonly string[]): Instruction[] =>
  args.map(parseInstruction).filter((i): i is Instruction => i !== null);

export type Folded =
  | { readonly kind: 'exit'; readonly output: string; readonly code: number }
  | { readonly kind: 'drop'; readonly output: string };

/**
 * What exec sees: stdout always, stderr only when merged, first terminal wins, default exit 0.
 * `stay` has no stdin under exec, so it meets EOF at once and exits 0.
 */
export const foldScript = (args: readonly string[], stderrToStdout: boolean): Folded => {
  let output = '';
  for (const ins of parseScript(args)) {
    switch (ins.kind) {
      case 'out':
        output += ins.data;
        break;
      case 'err':
        if (stderrToStdout) output += ins.data;
        break;
      case 'exit':
        return { kind: 'exit', output, code: ins.code };
      case 'drop':
        return { kind: 'drop', output };
      case 'stay':
        return { kind: 'exit', output, code: 0 };
    }
  }
  return { kind: 'exit', output, code: 0 };
};
