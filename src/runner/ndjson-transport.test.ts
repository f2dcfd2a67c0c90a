import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeFrame } from '../wire/index.ts';
import type { Reply, StreamFrame } from '../wire/index.ts';
import { openProcessBackend } from './backends/process/index.ts';
import type { ProcessBackend } from './backends/process/index.ts';
import { serveNdjson } from './ndjson-transport.ts';
import { captureLogger, until } from './testing.ts';

/** A peer speaking newline-delimited frames, as the host side of a guest link does. */
async function connect(port: number) {
  const sock: Socket = createConnection({ host: '127.0.0.1', port });
  await new Promise((r) => sock.once('connect', r));
  const frames: Array<Reply | StreamFrame> = [];
  let buf = '';
  sock.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
      const d2 = decodeFrame(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (d2.kind === 'reply') frames.push(d2.reply);
      if (d2.kind === 'stream') frames.push(d2.frame);
    }
  });
  const send = (o: object | string) => sock.write(`${typeof o === 'string' ? o : JSON.stringify(o)}\n`);
  const reply = (id: number) => until(() => frames.find((f): f is Reply => 'ok' in f && f.id === id), `reply ${id}`);
  return { sock, frames, send, reply };
}

describe('the protocol over a newline-delimited stream (guest-link framing)', () => {
  let dir: string;
  let backend: ProcessBackend;
  let server: Server;
  let port: number;

  before(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ndjson-')));
    const opened = openProcessBackend({ root: join(dir, 'home'), logger: captureLogger().logger });
    assert.ok(opened.ok);
    backend = opened.value;
    server = createServer((s) =>
      serveNdjson(s, backend, captureLogger().logger, { pingAgent: 'fountain runner-guest' }),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    await backend.stopAll();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers ping, refuses junk by id, and replays a session to a peer that reconnected', async () => {
    const a = await connect(port);
    a.send('garbage');
    a.send({ id: -1, op: 'ping' });
    assert.deepEqual(await a.reply(-1), { id: -1, ok: true, result: { agent: 'fountain runner-guest' } });
    a.send({ id: 2, op: 'nope' });
    assert.equal((await a.reply(2)).ok, false);
    a.send({ id: 3, op: 'create', name: 'sprite' });
    assert.equal((await a.reply(3)).ok, true);
    // One write carrying two frames, and one frame split across writes.
    a.sock.write(
      '{"id":4,"op":"spawn","name":"sprite","cmd":"bash","args":["-c","echo one; read x; echo $x"],"stdin":true}\n{"id":5,',
    );
    a.sock.write('"op":"list"}\n');
    const spawned = await a.reply(4);
    assert.ok(spawned.ok);
    assert.equal((await a.reply(5)).ok, true);
    const sid = String(spawned.result.session_id);
    await until(() => a.frames.some((f) => 'stream' in f && f.session_id === sid), 'first output');
    a.sock.destroy();

    const b = await connect(port);
    b.send({ id: 6, op: 'attach', name: 'sprite', session_id: sid });
    await b.reply(6);
    b.send({ id: 7, op: 'stdin', name: 'sprite', session_id: sid, data: Buffer.from('two\n').toString('base64') });
    await until(() => b.frames.some((f) => 'stream' in f && f.stream === 'exit'), 'exit');
    const out = b.frames
      .filter((f): f is StreamFrame & { data: string } => 'stream' in f && f.stream === 'stdout')
      .map((f) => Buffer.from(f.data, 'base64').toString())
      .join('');
    assert.equal(out, 'one\ntwo\n');
    assert.equal((b.frames.find((f) => 'stream' in f && f.stream === 'stdout') as StreamFrame).replay_for, 6);
    b.sock.destroy();
  });
});
