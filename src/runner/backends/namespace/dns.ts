/**
 * The per-sandbox resolver's wire format: parses one DNS query (RFC 1035) and builds the answer,
 * which is either the gateway's address for an allowed name or NXDOMAIN. No recursion, no cache.
 */
import { createSocket } from 'node:dgram';
import type { Socket } from 'node:dgram';
import { normalizeName } from './policy.ts';

export const TYPE_A = 1;
const CLASS_IN = 1;
const RCODE = { noError: 0, formErr: 1, servFail: 2, nxDomain: 3, notImp: 4, refused: 5 } as const;

export interface DnsQuery {
  readonly id: number;
  readonly rd: boolean;
  readonly name: string;
  readonly type: number;
  readonly qclass: number;
  /** The question section as received, echoed in the answer. */
  readonly question: Buffer;
}

/** Null when the packet is not a well-formed standard query with exactly one question. */
export function parseQuery(msg: Buffer): DnsQuery | null {
  if (msg.length < 12 || msg.length > 4096) return null;
  const flags = msg.readUInt16BE(2);
  if (flags & 0x8000) return null; // a response, not a query
  if (((flags >> 11) & 0xf) !== 0) return null; // only QUERY
  if (msg.readUInt16BE(4) !== 1) return null;
  const labels: string[] = [];
  let off = 12;
  for (;;) {
    if (off >= msg.length) return null;
    const len = msg[off]!;
    off += 1;
    if (len === 0) break;
    if (len > 63 || off + len > msg.length) return null; // compression pointers never appear in a question we accept
    labels.push(msg.toString('latin1', off, off + len));
    off += len;
  }
  if (off + 4 > msg.length) return null;
  const type = msg.readUInt16BE(off);
  const qclass = msg.readUInt16BE(off + 2);
  const name = labels.length === 0 ? '' : labels.join('.');
  return {
    id: msg.readUInt16BE(0),
    rd: (flags & 0x0100) !== 0,
    name,
    type,
    qclass,
    question: msg.subarray(12, off + 4),
  };
}

export type DnsAnswer =
  | { readonly kind: 'address'; readonly ipv4: string; readonly ttl: number }
  | { readonly kind: 'nodata' }
  | { readonly kind: 'nxdomain' };

export function buildReply(q: DnsQuery, answer: DnsAnswer): Buffer {
  const rcode = answer.kind === 'nxdomain' ? RCODE.nxDomain : RCODE.noError;
  const withRecord = answer.kind === 'address' && q.type === TYPE_A && q.qclass === CLASS_IN;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(q.id, 0);
  header.writeUInt16BE(0x8000 | 0x0400 | (q.rd ? 0x0100 : 0) | 0x0080 | rcode, 2); // QR, AA, RD echoed, RA
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(withRecord ? 1 : 0, 6);
  if (!withRecord) return Buffer.concat([header, q.question]);
  const rr = Buffer.alloc(16);
  rr.writeUInt16BE(0xc00c, 0); // the name of the question
  rr.writeUInt16BE(TYPE_A, 2);
  rr.writeUInt16BE(CLASS_IN, 4);
  rr.writeUInt32BE(answer.ttl, 6);
  rr.writeUInt16BE(4, 10);
  answer.ipv4.split('.').forEach((o, i) => rr.writeUInt8(Number(o), 12 + i));
  return Buffer.concat([header, q.question, rr]);
}

export function errorReply(msg: Buffer, rcode: number): Buffer | null {
  if (msg.length < 12) return null;
  const header = Buffer.from(msg.subarray(0, 12));
  header.writeUInt16BE(0x8000 | (msg.readUInt16BE(2) & 0x0100) | 0x0080 | rcode, 2);
  header.fill(0, 4, 12);
  return header;
}

/**
 * A UDP resolver on one address: `decide` says, per name, whether it resolves (to the gateway)
 * or not. Malformed packets get FORMERR when they carry a header, else silence.
 */
export async function startResolver(
  address: string,
  port: number,
  decide: (name: string) => DnsAnswer,
  onError: (e: Error) => void,
): Promise<Socket> {
  const sock = createSocket({ type: 'udp4', reuseAddr: true });
  sock.on('error', onError);
  sock.on('message', (msg, rinfo) => {
    const q = parseQuery(msg);
    let reply: Buffer | null;
    if (q === null) reply = errorReply(msg, RCODE.formErr);
    else {
      const name = normalizeName(q.name);
      reply = buildReply(q, name === null ? { kind: 'nxdomain' } : decide(name));
    }
    if (reply) sock.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind(port, address, () => {
      sock.off('error', reject);
      resolve();
    });
  });
  return sock;
}
