/**
 * Server-sent event messages encoded once for every subscriber: the framing hono's writeSSE writes,
 * as bytes, remembered per event object, so N clients tailing one conversation cost one encoding.
 */

export interface SseMessage {
  readonly event?: string;
  readonly data: string;
  readonly id?: string;
}

const encoder = new TextEncoder();

/** `event:`, one `data:` line per line of data, `id:`, blank line: byte for byte what writeSSE sends. */
export function encodeSse(m: SseMessage): Uint8Array {
  for (const v of [m.event, m.id]) if (v !== undefined && /[\r\n]/.test(v)) throw new Error('SSE event and id must not contain "\\r" or "\\n"');
  const lines = m.data.split(/\r\n|\r|\n/).map((l) => `data: ${l}`);
  if (m.event) lines.unshift(`event: ${m.event}`);
  if (m.id !== undefined) lines.push(`id: ${m.id}`);
  return encoder.encode(`${lines.join('\n')}\n\n`);
}

/**
 * An encoder that builds each key's message once: live events reach every subscriber as the same
 * object, so the second and later subscribers get the first one's bytes. Entries go with their key.
 */
export function sseOncePer<K extends object>(build: (key: K) => SseMessage): (key: K) => Uint8Array {
  const done = new WeakMap<K, Uint8Array>();
  return (key) => {
    let bytes = done.get(key);
    if (bytes === undefined) done.set(key, (bytes = encodeSse(build(key))));
    return bytes;
  };
}
