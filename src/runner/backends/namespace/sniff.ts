/**
 * Finds the name a connection is for from its first bytes: the SNI of a TLS ClientHello or the
 * Host header of an HTTP/1 request. Reads only what the client sent; never decrypts anything.
 */

export type Sniffed =
  | { readonly kind: 'more' }
  | { readonly kind: 'name'; readonly name: string }
  | { readonly kind: 'none'; readonly why: string };

/** The most a client may send before its name is known. */
export const MAX_SNIFF_BYTES = 16 * 1024 + 5;

export function sniffName(buf: Buffer): Sniffed {
  if (buf.length === 0) return { kind: 'more' };
  return buf[0] === 0x16 ? sniffTls(buf) : sniffHttp(buf);
}

function sniffTls(buf: Buffer): Sniffed {
  if (buf.length < 5) return { kind: 'more' };
  const recordLen = buf.readUInt16BE(3);
  if (buf.length < 5 + recordLen)
    return buf.length >= MAX_SNIFF_BYTES ? { kind: 'none', why: 'tls record too long' } : { kind: 'more' };
  const rec = buf.subarray(5, 5 + recordLen);
  // Every read below is bounds-checked through `at`, so a lying length ends in 'none', not a throw.
  let off = 0;
  const need = (n: number) => off + n <= rec.length;
  if (!need(4) || rec[0] !== 1) return { kind: 'none', why: 'not a ClientHello' };
  off = 4 + 2 + 32;
  if (!need(1)) return { kind: 'none', why: 'short ClientHello' };
  off += 1 + rec[off]!;
  if (!need(2)) return { kind: 'none', why: 'short ClientHello' };
  off += 2 + rec.readUInt16BE(off);
  if (!need(1)) return { kind: 'none', why: 'short ClientHello' };
  off += 1 + rec[off]!;
  if (!need(2)) return { kind: 'none', why: 'no extensions' };
  const extEnd = Math.min(rec.length, off + 2 + rec.readUInt16BE(off));
  off += 2;
  while (off + 4 <= extEnd) {
    const type = rec.readUInt16BE(off);
    const len = rec.readUInt16BE(off + 2);
    off += 4;
    if (off + len > extEnd) break;
    if (type === 0) {
      // server_name: list length, then (type 0 = host_name, length, name)
      let p = off + 2;
      const end = off + len;
      while (p + 3 <= end) {
        const nameType = rec[p]!;
        const nameLen = rec.readUInt16BE(p + 1);
        p += 3;
        if (p + nameLen > end) break;
        if (nameType === 0) return { kind: 'name', name: rec.toString('latin1', p, p + nameLen) };
        p += nameLen;
      }
      return { kind: 'none', why: 'malformed server_name' };
    }
    off += len;
  }
  return { kind: 'none', why: 'ClientHello without SNI' };
}

function sniffHttp(buf: Buffer): Sniffed {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return buf.length >= MAX_SNIFF_BYTES ? { kind: 'none', why: 'request head too long' } : { kind: 'more' };
  const lines = buf.toString('latin1', 0, end).split('\r\n');
  if (!/^[A-Z]+ \S+ HTTP\/1\.[01]$/.test(lines[0] ?? '')) return { kind: 'none', why: 'not an HTTP/1 request' };
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'host') {
      const value = line.slice(colon + 1).trim();
      // host[:port]; a bracketed IPv6 literal is not a name and is refused by the policy anyway
      const host = value.startsWith('[') ? value : value.replace(/:\d+$/, '');
      return { kind: 'name', name: host };
    }
  }
  return { kind: 'none', why: 'no Host header' };
}
