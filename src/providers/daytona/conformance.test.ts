/**
 * The sandbox conformance suite against the Daytona adapter and the local Daytona stub
 * (quirks on: EOF per input write, no exit codes in records, broken follow socket).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Private } from '../../sandbox/index.ts';
import type { Handle } from '../../sandbox/index.ts';
import { runConformanceSuite } from '../../sandbox/conformance/index.ts';
import { DaytonaStub } from '../../../test/stubs/daytona/server.ts';
import { STAY_SCRIPT } from '../../../test/stubs/daytona/frames.ts';
import { DaytonaAdapter } from './adapter.ts';
import type { DaytonaHandlePrivate } from './adapter.ts';

const KEY = 'dtn_conformance_secret_5f3a9c1e7b';
let stub: DaytonaStub;
let adapter: DaytonaAdapter;
let scratch: string;

const build = (apiUrl: string) => new DaytonaAdapter({ apiKey: KEY, apiUrl, pollIntervalMs: 20, statePollMs: 10 });

runConformanceSuite('daytona adapter against the Daytona stub', {
  adapter: () => adapter,
  before: async () => {
    stub = await DaytonaStub.start({ apiKey: KEY, inputEofPerWrite: true, exitCodes: 'missing' });
    adapter = build(stub.apiUrl);
    // The stub's daemon shares the host filesystem; each run gets its own scratch directory.
    scratch = mkdtempSync(join(tmpdir(), 'daytona-conformance-'));
  },
  after: async () => {
    await stub.stop();
    rmSync(scratch, { recursive: true, force: true });
  },
  get scratchDir() {
    return scratch;
  },
  fixtures: {
    execOk: { cmd: 'sh', args: ['-c', 'echo conformance-ok'], expectedStdout: 'conformance-ok' },
    execFail: { cmd: 'sh', args: ['-c', 'echo failing >&2; exit 3'], nonzeroCode: 3 },
    spawnOk: { cmd: 'sh', args: ['-c', 'echo spawned-ok'] },
    // Kills its own shim before the shim can write the exit sentinel: the stream closes with no verdict.
    spawnDrop: { cmd: 'sh', args: ['-c', 'echo dropping; sleep 0.1; kill -9 $PPID'] },
    spawnStay: { cmd: 'sh', args: ['-c', STAY_SCRIPT] },
  },
  readFile: async (handle: Handle, path: string) => {
    const r = await adapter.processes.exec(handle, 'sh', ['-c', 'cat -- "$1" 2>/dev/null || exit 44', 'read', path]);
    if (!r.ok || r.value.exitCode === 44) return null;
    return r.value.output;
  },
  brokenTransport: async () => {
    const doomed = await DaytonaStub.start({ apiKey: KEY });
    const a = build(doomed.apiUrl);
    const h = await a.lifecycle.create('fountain-broken0-00000001');
    if (!h.ok) throw new Error(`setup: ${h.error.code}`);
    await doomed.stop();
    return { adapter: a, handle: h.value };
  },
  secret: async () => {
    const h = await adapter.lifecycle.create(`fountain-secret0-${Date.now().toString(16).slice(-8)}`);
    if (!h.ok) throw new Error(`setup: ${h.error.code}`);
    const p = (h.value.private as Private<DaytonaHandlePrivate>).reveal();
    if (p.apiKey !== KEY) throw new Error('the handle should carry the key it was made with');
    return { handle: h.value, value: KEY };
  },
});
