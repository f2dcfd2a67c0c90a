/**
 * The host end of Firecracker's hybrid vsock: connect to the VM's unix socket, send
 * `CONNECT <port>\n` in one write, and take `OK <host_port>\n` as the start of a raw byte stream.
 */
import { createConnection } from 'node:net';
import type { Socket } from 'node:net';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';

export const GUEST_PORT = 1024;

const notListening = (port: number, why: string) =>
  `the guest agent is not listening on vsock port ${port} (${why}); the base rootfs must start \`fountain runner-guest\` at boot`;

export function dialHybridVsock(path: string, port: number, timeoutMs: number): Promise<Result<Socket, string>> {
  return new Promise((resolve) => {
    const sock = createConnection(path);
    let settled = false;
    let line = Buffer.alloc(0);
    const finish = (r: Result<Socket, string>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.off('data', onData);
      if (!r.ok) sock.destroy();
      resolve(r);
    };
    const timer = setTimeout(
      () => finish(err(notListening(port, `no answer to CONNECT within ${timeoutMs} ms`))),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      line = Buffer.concat([line, chunk]);
      const nl = line.indexOf(10);
      if (nl === -1) {
        if (line.length > 64) finish(err(notListening(port, 'unexpected handshake reply')));
        return;
      }
      const head = line.subarray(0, nl).toString('utf8');
      const rest = line.subarray(nl + 1);
      if (!/^OK \d+$/.test(head))
        return finish(err(notListening(port, `handshake reply ${JSON.stringify(head.slice(0, 40))}`)));
      sock.pause();
      // Bytes that arrived with the OK line belong to the stream.
      if (rest.length) sock.unshift(rest);
      finish(ok(sock));
    };
    sock.on('data', onData);
    sock.once('connect', () => sock.write(`CONNECT ${port}\n`));
    sock.once('error', (e) => finish(err(notListening(port, e.message))));
    sock.once('close', () => finish(err(notListening(port, 'the connection closed without OK'))));
  });
}
