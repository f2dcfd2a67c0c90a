import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { err, ok } from '../../../sandbox/result.ts';
import type { StreamFrame } from '../../../wire/index.ts';
import { CollectingOut, captureLogger, until } from '../../testing.ts';
import { GuestLink } from './guest-link.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * A guest agent scripted per test over a real unix socket: it writes each answer in ONE write,
 * reply and frames together, as a fast guest does; that is the case rule 1 exists for.
 */
describe('guest link ordering rules', () => {
  let dir: string;
  let server: Server;
  let sockets: Socket[] = [];
  let answer: (req: { id: number; op: string }, sock: Socket) => void = () => {};

  const link = () =>
    new GuestLink({
      dial: (ms) =>
        new Promise((resolve) => {
          const s = createConnection(join(dir, 'guest.sock'));
          const t = setTimeout(() => resolve(err('timeout')), ms);
          s.once('connect', () => (clearTimeout(t), resolve(ok(s))));
          s.once('error', (e) => (clearTimeout(t), resolve(err(e.message))));
        }),
      logger: captureLogger().logger,
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-link-'));
    server = createServer((s) => {
      sockets.push(s);
      let buf = '';
      s.on('data', (d) => {
        buf += d.toString();
        for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
          const req = JSON.parse(buf.slice(0, nl)) as { id: number; op: string };
          buf = buf.slice(nl + 1);
          answer(req, s);
        }
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(join(dir, 'guest.sock'), r));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('rule 1: frames that arrive with the spawn reply wait until the daemon released them', async () => {
    answer = (req, s) => {
      if (req.op !== 'spawn') return;
      const frames = [
        { id: req.id, ok: true, result: { session_id: 's-1' } },
        { stream: 'stdout', session_id: 's-1', data: b64('replayed'), replay_for: req.id },
        { stream: 'stdout', session_id: 's-1', data: b64('live') },
      ];
      s.write(frames.map((f) => `${JSON.stringify(f)}\n`).join(''));
    };
    const l = link();
    const out = new CollectingOut();
    const r = await l.call({ op: 'spawn', name: 'sprite', cmd: 'x', args: [], env: [] }, { timeoutMs: 5000 });
    assert.ok(r.ok && r.value.gate);
    // The daemon's reply would be written here; nothing of the session may have gone out yet.
    await new Promise((res) => setTimeout(res, 50));
    assert.deepEqual(out.frames, []);
    l.release(r.value.gate, out, 77);
    assert.deepEqual(out.frames, [
      { stream: 'stdout', session_id: 's-1', data: b64('replayed'), replay_for: 77 },
      { stream: 'stdout', session_id: 's-1', data: b64('live') },
    ]);
    l.close();
  });

  it('rule 2: a drop ends each live session once with a note and 137, fails pending calls; close() synthesizes nothing', async () => {
    answer = (req, s) => {
      if (req.op === 'spawn')
        s.write(`${JSON.stringify({ id: req.id, ok: true, result: { session_id: `s-${req.id}` } })}\n`);
      if (req.op === 'exec') s.destroy(); // the VM dies mid-call
    };
    const l = link();
    const out = new CollectingOut();
    const a = await l.call({ op: 'spawn', name: 'sprite', cmd: 'x', args: [], env: [] }, { timeoutMs: 5000 });
    const b = await l.call({ op: 'spawn', name: 'sprite', cmd: 'y', args: [], env: [] }, { timeoutMs: 5000 });
    assert.ok(a.ok && a.value.gate && b.ok && b.value.gate);
    l.release(a.value.gate, out, 1);
    l.release(b.value.gate, out, 2);
    const pending = await l.call({ op: 'exec', name: 'sprite', cmd: 'z', args: [], env: [] }, { timeoutMs: 5000 });
    assert.equal(!pending.ok && pending.error.code, 'unavailable');
    await until(() => out.frames.filter((f) => f.stream === 'exit').length === 2, 'two exits');
    for (const sid of [a.value.result.session_id, b.value.result.session_id] as string[]) {
      const frames = out.frames.filter((f: StreamFrame) => f.session_id === sid);
      assert.equal(frames.length, 2);
      assert.equal(frames[0]?.stream, 'stderr');
      assert.match(out.bytes(sid, ['stderr']).toString(), /agent connection dropped/);
      assert.deepEqual(frames[1], { stream: 'exit', session_id: sid, code: 137 });
    }
    // A second drop (after a reconnect) does not end them again; a deliberate close ends nothing.
    answer = (req, s) => {
      if (req.op === 'spawn') s.write(`${JSON.stringify({ id: req.id, ok: true, result: { session_id: 's-c' } })}\n`);
      if (req.op === 'list') s.destroy();
    };
    const c = await l.call({ op: 'spawn', name: 'sprite', cmd: 'w', args: [], env: [] }, { timeoutMs: 5000 });
    assert.ok(c.ok && c.value.gate);
    l.release(c.value.gate, out, 3);
    l.close();
    await new Promise((res) => setTimeout(res, 100));
    assert.equal(out.frames.filter((f) => f.stream === 'exit').length, 2);
    assert.deepEqual(
      out.frames.filter((f) => f.session_id === 's-c'),
      [],
    );
  });
});
