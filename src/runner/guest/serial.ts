/**
 * A virtio-serial port as a Duplex: reads through a ReadStream on the port's descriptor, ordered
 * writes with fs.write. The port reads EOF while no host is connected; the caller reopens it.
 */
import { close, createReadStream, open, write } from 'node:fs';
import type { ReadStream } from 'node:fs';
import { Duplex } from 'node:stream';

export class FdDuplex extends Duplex {
  readonly #fd: number;
  readonly #reader: ReadStream;

  constructor(fd: number) {
    super();
    this.#fd = fd;
    this.#reader = createReadStream('', { fd, autoClose: false, highWaterMark: 64 * 1024 });
    this.#reader.on('data', (chunk) => {
      if (!this.push(chunk)) this.#reader.pause();
    });
    this.#reader.on('end', () => this.push(null));
    this.#reader.on('error', (e) => this.destroy(e));
  }

  override _read(): void {
    this.#reader.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    const step = (offset: number) => {
      write(this.#fd, chunk, offset, chunk.length - offset, null, (e, n) => {
        if (e) return cb(e);
        if (offset + n < chunk.length) step(offset + n);
        else cb();
      });
    };
    step(0);
  }

  override _final(cb: (e?: Error | null) => void): void {
    cb();
  }

  override _destroy(e: Error | null, cb: (e?: Error | null) => void): void {
    this.#reader.destroy();
    close(this.#fd, () => cb(e));
  }
}

export function openPort(path: string): Promise<FdDuplex> {
  return new Promise((resolve, reject) => {
    open(path, 'r+', (e, fd) => (e ? reject(e) : resolve(new FdDuplex(fd))));
  });
}
