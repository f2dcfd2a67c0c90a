/**
 * Checks a checkpoint archive (tar, gzip) before any of it reaches a sandbox: every entry is a plain
 * file, directory or link whose path, and a link's target, stays inside the directory it unpacks into.
 */
import { createGunzip } from 'node:zlib';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { posix } from 'node:path';
import { extract } from 'tar-stream';
import { err, ok, type Result } from '../../sandbox/result.ts';

export interface ArchiveSummary {
  readonly files: number;
  readonly directories: number;
  readonly links: number;
  /** Bytes of file content once unpacked. */
  readonly bytes: number;
}

export interface ArchiveRefusal {
  readonly code: 'corrupt' | 'escapes' | 'too_large' | 'unsupported_entry';
  readonly message: string;
}

/** Where `name` lands relative to the unpack directory, or null when it would leave it. */
export function insideRoot(name: string): string | null {
  if (name.includes('\0') || posix.isAbsolute(name)) return null;
  const n = posix.normalize(name);
  if (n === '..' || n.startsWith('../')) return null;
  return n === '.' || n === './' ? '.' : n.replace(/\/$/, '');
}

/**
 * Reads the whole archive; refuses it at the first entry that would write outside the root (an absolute
 * or `..` path, a link pointing out), at a device, fifo or other special entry, when it unpacks to more
 * than `maxBytes`, or when it is not a whole gzip'd tar.
 */
export async function checkArchive(
  data: Buffer,
  opts: { maxBytes: number },
): Promise<Result<ArchiveSummary, ArchiveRefusal>> {
  const summary = { files: 0, directories: 0, links: 0, bytes: 0 };
  let refusal: ArchiveRefusal | null = null;
  const tar = extract();
  tar.on('entry', (header, stream, next) => {
    const refuse = (r: ArchiveRefusal) => {
      refusal ??= r;
      stream.resume();
      stream.on('end', () => next(new Error(r.message)));
    };
    const at = insideRoot(header.name);
    if (at === null)
      return refuse({ code: 'escapes', message: `entry ${JSON.stringify(header.name)} leaves the sandbox` });
    switch (header.type) {
      case 'file':
      case 'contiguous-file':
        summary.files++;
        summary.bytes += header.size ?? 0;
        if (summary.bytes > opts.maxBytes)
          return refuse({ code: 'too_large', message: `the archive unpacks to more than ${opts.maxBytes} bytes` });
        break;
      case 'directory':
        summary.directories++;
        break;
      case 'symlink':
      case 'link': {
        summary.links++;
        const target = header.linkname ?? '';
        // A symlink's target is read from the link's own folder; a hard link's from the root.
        const resolved = header.type === 'symlink' ? posix.join(posix.dirname(at), target) : target;
        if (posix.isAbsolute(target) || insideRoot(resolved) === null)
          return refuse({
            code: 'escapes',
            message: `link ${JSON.stringify(header.name)} points outside the sandbox (${JSON.stringify(target)})`,
          });
        break;
      }
      default:
        return refuse({
          code: 'unsupported_entry',
          message: `entry ${JSON.stringify(header.name)} is a ${header.type}, which a checkpoint never holds`,
        });
    }
    stream.resume();
    stream.on('end', () => next());
  });
  try {
    await pipeline(Readable.from([data]), createGunzip(), tar);
  } catch (e) {
    if (refusal) return err(refusal);
    return err({ code: 'corrupt', message: `the archive is not a whole tar.gz: ${(e as Error).message}` });
  }
  return refusal ? err(refusal) : ok(summary);
}
