/**
 * Output-frame buffers the runner reuses once its transport wrote them: a frame costs a buffer the
 * size of its base64 payload, and allocating one per 64 KiB chunk (or 1 MiB replay frame) made the
 * garbage collector the runner's largest cost when streaming and replaying.
 */

/** Buffers come in power-of-two sizes from this one up, so frames of similar size share them. */
const MIN_CLASS = 64 * 1024;
/** Spare buffers kept at most, all sizes together; the rest are left to the collector. */
const MAX_SPARE_BYTES = 8 * 1024 * 1024;

export class FramePool {
  readonly #spare = new Map<number, Buffer[]>();
  #spareBytes = 0;

  /** A buffer of at least `size` bytes; its contents are undefined. */
  take(size: number): Buffer {
    const cls = sizeClass(size);
    const reused = this.#spare.get(cls)?.pop();
    if (reused === undefined) return Buffer.allocUnsafeSlow(cls);
    this.#spareBytes -= cls;
    return reused;
  }

  /** Hands a buffer from take() back, once nothing reads it any more. */
  give(buf: Buffer): void {
    if (buf.length !== sizeClass(buf.length) || this.#spareBytes + buf.length > MAX_SPARE_BYTES) return;
    let list = this.#spare.get(buf.length);
    if (!list) this.#spare.set(buf.length, (list = []));
    list.push(buf);
    this.#spareBytes += buf.length;
  }

  get spareBytes(): number {
    return this.#spareBytes;
  }
}

function sizeClass(size: number): number {
  let c = MIN_CLASS;
  while (c < size) c *= 2;
  return c;
}
