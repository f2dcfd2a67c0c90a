/**
 * The envd client against the stub, at the level below the adapter: why attach cannot use
 * Connect (no replay, output dropped while nobody listens), unary error mapping, and the stub's
 * fidelity to connect-go and envd where the adapter's own behaviour cannot show it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { E2BStub } from '../../../test/stubs/e2b/server.ts';
import { sleep } from '../../../test/stubs/e2b/frames.ts';
import { E2BAdapter } from './index.ts';
import type { E2BTarget } from './index.ts';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Envd } from './envd.ts';
import { Process } from './gen/process_pb.ts';
import type { EndEvent, ProcessEventSink, StreamClose } from './envd.ts';

const KEY = 'e2b_envd_test_key_0123';

class Recorder implements ProcessEventSink {
  out = '';
  started = false;
  ended: EndEvent | null = null;
  closedHow: StreamClose | null = null;
  start() {
    this.started = true;
  }
  stdout(d: Buffer) {
    this.out += d.toString();
  }
  stderr() {}
  end(e: EndEvent) {
    this.ended = e;
  }
  closed(how: StreamClose) {
    this.closedHow = how;
  }
}

describe('envd client against the stub', () => {
  let stub: E2BStub;
  let adapter: E2BAdapter;
  before(async () => {
    stub = await E2BStub.start({ apiKey: KEY });
    adapter = new E2BAdapter({ apiKey: KEY, baseUrl: stub.apiUrl, sandboxUrl: stub.sandboxUrl });
  });
  after(async () => {
    adapter.close();
    await stub.stop();
  });

  it('stub fidelity (#1640, #2639): Connect to a live process replays nothing and misses output printed while detached', async () => {
    const h = await adapter.lifecycle.create('fountain-envdtest-00000001');
    assert.ok(h.ok);
    const target = h.value.private?.reveal() as E2BTarget;
    const envd = new Envd(
      { sandboxId: target.sandboxId, accessToken: target.accessToken, sandboxUrl: stub.sandboxUrl },
      { timeoutMs: 5000, keepaliveS: 30 },
    );
    const first = new Recorder();
    const stream = envd.start(
      {
        process: {
          cmd: 'sh',
          args: ['-c', 'echo before; sleep 0.3; echo while-detached; read l; echo "after:$l"'],
          envs: {},
        },
        tag: 'detached-1',
        stdin: true,
      },
      0,
      first,
    );
    for (let i = 0; i < 100 && !first.out.includes('before'); i++) await sleep(20);
    stream.abort();
    await sleep(600);
    const rec = new Recorder();
    envd.connect({ tag: 'detached-1' }, rec);
    for (let i = 0; i < 100 && !rec.started; i++) await sleep(20);
    const w = await envd.sendInput({ tag: 'detached-1' }, Buffer.from('x\n'));
    assert.ok(w.ok, inspect(w));
    for (let i = 0; i < 100 && !rec.closedHow; i++) await sleep(50);
    assert.ok(rec.started);
    assert.equal(rec.out, 'after:x\n', 'Connect delivered only what was printed after it subscribed');
    assert.deepEqual(
      rec.ended && { exited: rec.ended.exited, exitCode: rec.ended.exitCode },
      { exited: true, exitCode: 0 },
      'exit 0 (omitted on the wire) decodes as 0',
    );
    assert.deepEqual(rec.closedHow, { kind: 'end_stream' });
  });

  it('unary errors: a process envd does not know is not_found; a bad token is denied', async () => {
    const h = await adapter.lifecycle.create('fountain-envdtest-00000002');
    assert.ok(h.ok);
    const target = h.value.private?.reveal() as E2BTarget;
    const envd = new Envd(
      { sandboxId: target.sandboxId, accessToken: target.accessToken, sandboxUrl: stub.sandboxUrl },
      { timeoutMs: 5000, keepaliveS: 30 },
    );
    const missing = await envd.sendInput({ tag: 'nope' }, new Uint8Array(0));
    assert.equal(!missing.ok && missing.error.code, 'not_found');
    const bad = new Envd(
      { sandboxId: target.sandboxId, accessToken: 'wrong-token', sandboxUrl: stub.sandboxUrl },
      { timeoutMs: 5000, keepaliveS: 30 },
    );
    const denied = await bad.list();
    assert.equal(!denied.ok && denied.error.code, 'denied');
    const rec = new Recorder();
    envd.connect({ tag: 'nope' }, rec);
    for (let i = 0; i < 100 && !rec.closedHow; i++) await sleep(20);
    assert.equal(
      rec.closedHow?.kind === 'end_stream' && rec.closedHow.error?.code,
      'not_found',
      'stream RPC errors arrive in the end-stream with HTTP 200',
    );
  });

  it('stub fidelity (connect-go, envd handler.go): a 0 deadline ends Start before `start` while the process runs on; stdin is open when omitted; a missing binary is exit 127', async () => {
    const h = await adapter.lifecycle.create('fountain-envdtest-00000003');
    assert.ok(h.ok);
    const target = h.value.private?.reveal() as E2BTarget;
    const headers = { 'e2b-sandbox-id': target.sandboxId, 'x-access-token': target.accessToken ?? '' };
    const raw = createClient(Process, createConnectTransport({ baseUrl: stub.sandboxUrl, httpVersion: '1.1' }));
    const events: string[] = [];
    const zero = (async () => {
      for await (const m of raw.start(
        { process: { cmd: 'sh', args: ['-c', 'sleep 0.3; echo ran > "$HOME/zero"'] } },
        { headers: { ...headers, 'connect-timeout-ms': '0' } },
      )) {
        events.push(m.event?.event.case ?? '?');
      }
    })();
    await assert.rejects(zero, (e: unknown) => ConnectError.from(e).code === Code.DeadlineExceeded);
    assert.deepEqual(events, [], 'the stream ended before start');
    const envd = new Envd(
      { sandboxId: target.sandboxId, accessToken: target.accessToken, sandboxUrl: stub.sandboxUrl },
      { timeoutMs: 5000, keepaliveS: 30 },
    );
    let exists = false;
    for (let i = 0; i < 100 && !exists; i++) {
      await sleep(50);
      const r = await envd.exists('~/zero');
      exists = r.ok && r.value;
    }
    assert.ok(exists, 'the process started and ran anyway');
    // No `stdin` field: envd opens stdin (clients older than the field rely on it).
    const opened = (async () => {
      const out: string[] = [];
      for await (const m of raw.start(
        { process: { cmd: 'sh', args: ['-c', 'read l; echo "in:$l"'] }, tag: 'stdin-default' },
        { headers },
      )) {
        const e = m.event?.event;
        if (e?.case === 'start')
          await raw.sendInput(
            {
              process: { selector: { case: 'pid', value: e.value.pid } },
              input: { input: { case: 'stdin', value: Buffer.from('hi\n') } },
            },
            { headers },
          );
        if (e?.case === 'data' && e.value.output.case === 'stdout')
          out.push(Buffer.from(e.value.output.value).toString());
      }
      return out.join('');
    })();
    assert.equal(await opened, 'in:hi\n');
    const missing = new Recorder();
    envd.start({ process: { cmd: 'no-such-binary-e2b', args: [], envs: {} }, stdin: false }, 0, missing);
    for (let i = 0; i < 100 && !missing.closedHow; i++) await sleep(20);
    assert.deepEqual(missing.ended && [missing.ended.exited, missing.ended.exitCode], [true, 127], inspect(missing));
  });
});
