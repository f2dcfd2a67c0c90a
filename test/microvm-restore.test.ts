/**
 * The demo conversation's cycle in a QEMU microVM, with a restore: turn 1 on a `fountain runner
 * --backend firecracker --vmm qemu` child (a real VM under software emulation), its checkpoint taken,
 * the runner stopped (its VM gone), its directory removed and the runner deleted; turn 2 on a process
 * runner restores the checkpoint into a new sandbox and recalls turn 1.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import {
  INITRD,
  KERNEL,
  QEMU_BIN,
  QEMU_MACHINE,
  ROOTFS,
  assertRealVmsAvailable,
  realVmSkip,
} from '../src/runner/backends/firecracker/testing/guest-image.ts';
import { type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { answerOf, call, type Json, watchOver } from './helpers/http.ts';

const skip = realVmSkip();
// Hang guards only: a boot under TCG on a loaded 2-core machine can take minutes.
const LONG = 420_000;

describe('the demo cycle in a QEMU microVM, restored after the VM and its runner are gone', {
  skip,
  timeout: 1_200_000,
}, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  const runners: RunnerChild[] = [];
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const { online, events, turnEnd: ended } = watchOver(api);
  const turnEnd = (id: string, turnId: string) => ended(id, turnId, LONG);
  const stagesOf = (all: Json[]) => JSON.stringify(all.filter((e) => e.stage).map((e) => [e.stage, e.state, e.data]));

  before(async () => {
    assertRealVmsAvailable();
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-vm-restore-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      // Creating a sandbox on the microVM runner answers once its VM booted: minutes under emulation.
      env: { FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: '400000' },
      acceptRunnerSocket,
      engine: { askTimeoutMs: 60_000, acpCallTimeoutMs: 300_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    for (const r of runners) console.error(`runner stderr (last 3000 characters): ${r.stderr().slice(-3000)}`);
    for (const r of runners) await r.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('turn 1 in a VM; with the VM and its runner gone, turn 2 on another runner restores and recalls', async () => {
    const vm = startRunnerChild({
      name: 'vm',
      root: join(tmp, 'root-vm'),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
      logLevel: 'info',
      extraArgs: [
        '--backend',
        'firecracker',
        '--vmm',
        'qemu',
        '--qemu-bin',
        QEMU_BIN,
        '--qemu-machine',
        QEMU_MACHINE,
        '--fc-kernel',
        KERNEL,
        '--fc-initrd',
        INITRD,
        '--fc-rootfs',
        ROOTFS,
        '--fc-vcpus',
        '1',
        '--fc-memory-mib',
        '512',
        '--fc-boot-timeout',
        '300',
      ],
    });
    runners.push(vm);
    const runnerVm = await online('vm');
    const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const conv = await api('POST', '/api/conversations', {
      agent_id: agent.id,
      prompt: 'remember: the launch code is 0451',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = conv.body.data.id;
    const first = (await api('GET', `/api/conversations/${id}/turns`)).body.data[0];
    // What a slow boot is doing, while it does it.
    const t0 = Date.now();
    const progress = setInterval(() => {
      void events(id).then((all) =>
        console.error(`[vm ${Math.round((Date.now() - t0) / 1000)} s] ${stagesOf(all).slice(-600)}`),
      );
    }, 30_000);
    const end1 = await turnEnd(id, first.id).finally(() => clearInterval(progress));
    assert.equal(end1.state, 'done', stagesOf(await events(id)));
    const before = (await api('GET', `/api/conversations/${id}`)).body.data;
    assert.equal(before.sandbox.runner.name, 'vm', 'turn 1 ran on the microVM runner');
    await until(
      async () => {
        const r = (await srv.database.db.execute(
          sql`SELECT count(*)::int AS n FROM checkpoints WHERE conversation_id = ${id}`,
        )) as unknown as { rows: Array<{ n: number }> };
        return r.rows[0]!.n > 0;
      },
      'the checkpoint of turn 1',
      LONG,
    );

    // The runner stops with its VMs; its disk is wiped and the runner deleted.
    await vm.stop();
    rmSync(join(tmp, 'root-vm'), { recursive: true, force: true });
    assert.equal((await api('DELETE', `/api/runners/${runnerVm.id}`)).status, 204);
    runners.push(
      startRunnerChild({ name: 'second', root: join(tmp, 'root-second'), baseUrl: srv.url, apiKey: key, home: tmp }),
    );
    await online('second');

    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'recall' });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const end2 = await turnEnd(id, p.body.turn_id);
    const all = await events(id);
    assert.equal(end2.state, 'done', stagesOf(all));
    const restored = all.find((e) => e.stage === 'sandbox' && JSON.parse(e.data).event === 'restored');
    assert.ok(restored, `the conversation says it was restored: ${stagesOf(all)}`);
    assert.equal(JSON.parse(restored.data).from_turn, first.id);
    assert.match(answerOf(all, p.body.turn_id), /0451/, 'turn 2 recalls what turn 1 was told in the VM');
    assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name, 'second');
  });
});
