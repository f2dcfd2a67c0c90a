/**
 * The frame collector's own checks: waiting, consuming in order, and catching a second
 * terminal frame or a frame after the terminal one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FrameCollector } from './frames.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('FrameCollector', () => {
  it('next() waits for a frame that arrives later and consumes in order', async () => {
    const c = new FrameCollector();
    const pending = c.nextStdout('r', 5000);
    setImmediate(() => {
      c.sink({ type: 'stdout', ref: 'r', data: bytes('a') });
      c.sink({ type: 'stdout', ref: 'r', data: bytes('b') });
    });
    assert.equal(new TextDecoder().decode((await pending).data), 'a');
    assert.equal(new TextDecoder().decode((await c.nextStdout('r', 5000)).data), 'b');
    assert.equal(c.text('r'), 'ab');
  });

  it('next() rejects with the frames seen when nothing matches in time', async () => {
    const c = new FrameCollector();
    c.sink({ type: 'stdout', ref: 'other', data: bytes('x') });
    await assert.rejects(c.terminal('r', 20), /terminal frame for r.*stdout\(other/);
  });

  it('expectSettled() fails on a second terminal frame inside the quiet period', async () => {
    const c = new FrameCollector();
    c.sink({ type: 'exit', ref: 'r', code: 0 });
    setTimeout(() => c.sink({ type: 'exit', ref: 'r', code: 0 }), 5);
    await assert.rejects(c.expectSettled('r'), /after the terminal frame|exactly one terminal/);
  });

  it('expectSettled() passes with one terminal frame and flags a forbidden one', async () => {
    const ok = new FrameCollector();
    ok.sink({ type: 'stdout', ref: 'r', data: bytes('x') });
    ok.sink({ type: 'exit', ref: 'r', code: 0 });
    await ok.expectSettled('r');
    const bad = new FrameCollector();
    bad.sink({ type: 'exit', ref: 'r', code: 0 });
    await assert.rejects(
      bad.expectSettled('r', (f) => f.type === 'exit', 'an exit'),
      /an exit/,
    );
  });

  it('waitForText() is chunking-agnostic', async () => {
    const c = new FrameCollector();
    const p = c.waitForText('r', 'ping', 5000);
    c.sink({ type: 'stdout', ref: 'r', data: bytes('pi') });
    c.sink({ type: 'stdout', ref: 'r', data: bytes('ng') });
    assert.equal(await p, 'ping');
  });
});
