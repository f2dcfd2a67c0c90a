/**
 * The gateway's two waits on a socket: the whole request body up to a size, and a response draining
 * before more is written (so a slow caller holds the vendor's stream back instead of memory filling).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Resolves true once `res` drains, false if it closes first; leaves no listener behind. */
export function drained(res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}

/** The whole request body, or null past `max` bytes (a model request is read before it is forwarded). */
export async function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > max) {
      req.resume();
      return null;
    }
    chunks.push(c as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
