/**
 * The nesting bound of wire frames, checked on the raw text before JSON.parse: a hostile peer's
 * deeply nested frame is refused in one linear scan instead of recursing through later steps.
 */

/** Real frames nest a handful of levels (a reply's result, a session list); 64 leaves room. */
export const MAX_FRAME_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/** True when arrays and objects in the JSON text nest deeper than `max`; brackets inside strings do not count. */
export function nestsDeeperThan(text: string | Uint8Array, max: number = MAX_FRAME_DEPTH): boolean {
  const at = typeof text === 'string' ? (i: number) => text.charCodeAt(i) : (i: number) => text[i]!;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = at(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return false;
}

/** The words both ends use when they refuse such a frame. */
export const TOO_DEEP = `frames may nest at most ${MAX_FRAME_DEPTH} levels`;
