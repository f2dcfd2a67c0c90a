/**
 * The demo agent's session title: the gist of the first message, as a person would title it, without
 * naming the agent (every conversation with the demo would otherwise read "Demo: …").
 */
/** A title from a first message: its first line, cut at a word near 60 characters (no "Demo:" prefix). */
export function gist(text: string): string {
  const line = text.trim().split('\n')[0]!.replace(/\s+/g, ' ');
  if (line.length <= 60) return line;
  const cut = line.slice(0, 60);
  const space = cut.lastIndexOf(' ');
  return `${(space > 30 ? cut.slice(0, space) : cut).trimEnd()}…`;
}
