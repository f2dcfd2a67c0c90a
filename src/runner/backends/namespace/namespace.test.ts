import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CollectingOut, captureLogger, until } from '../../testing.ts';
import type { OpResult } from '../../backend.ts';
import type { ProcessBackend } from '../process/index.ts';
import { defaultProgramDirs, namespaceSupportProblem, openNamespaceBackend } from './index.ts';
import { startTestInternet } from './testing.ts';
import { TRUST_ENV_KEYS } from '../process/env.ts';
import type { TestInternet } from './testing.ts';

const problem = namespaceSupportProblem();
const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString();
let nextId = 1;
const id = () => nextId++;
const value = <T extends object>(r: OpResult<T>): T => {
  if (!r.ok) assert.fail(`expected ok, got ${r.error.code}: ${r.error.detail}`);
  return r.value.result;
};
/** Keeps concurrent runs on one machine apart (addresses, namespace names). */
const octet = 20 + (process.pid % 200);

describe('namespace backend', { skip: problem ?? false }, () => {
  let root: string;
  let backend: ProcessBackend;
  let inet: TestInternet;
  let hostListener: Server;
  let install: string;

  before(async () => {
    inet = await startTestInternet(octet);
    root = join(realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ns-'))), 'sandboxes');
    // An agent's program installed under the temporary directory, which the sandbox's own /tmp covers.
    install = join(root, '..', 'install');
    mkdirSync(install, { recursive: true });
    // An installation is readable by every user (mkdtemp made its parent 0700): sandboxes run as their own uid.
    chmodSync(join(root, '..'), 0o755);
    writeFileSync(join(install, 'agent.sh'), 'echo "agent runs in $(pwd)"\n');
    const names: Record<string, string[]> = {
      'allowed.test': [inet.address],
      'denied.test': [inet.address],
      'sub.wild.test': [inet.address],
    };
    const opened = openNamespaceBackend({
      root,
      logger: captureLogger().logger,
      subnet: `10.62.${octet}.0/24`,
      cgroupParent: `fountain-test-${process.pid}`,
      lookup: async (name) => names[name] ?? [],
      graceMs: { destroy: 1000, suspend: 1000, stopAll: 1000 },
      memoryMib: 256,
      maxPids: 64,
      programDirs: [install, ...defaultProgramDirs()],
    });
    assert.ok(opened.ok, opened.ok ? '' : opened.error);
    backend = opened.value;
    // A host service the sandbox must not reach: listening on every host address.
    hostListener = createServer((s) => s.end('host service\n'));
    await new Promise<void>((r) => hostListener.listen(0, '0.0.0.0', () => r()));
  });
  after(async () => {
    await backend?.stopAll();
    hostListener?.close();
    inet?.close();
    if (root) rmSync(join(root, '..'), { recursive: true, force: true });
    for (const c of ['freezer', 'memory', 'pids']) {
      try {
        rmdirSync(join('/sys/fs/cgroup', c, `fountain-test-${process.pid}`));
      } catch {
        // never made
      }
    }
  });

  const create = async (name: string) => value(await backend.create({ id: id(), op: 'create', name }));
  const sh = async (name: string, script: string) => {
    const r = value(
      await backend.exec({
        id: id(),
        op: 'exec',
        name,
        cmd: 'sh',
        args: ['-c', script],
        env: [],
        stderr_to_stdout: true,
      }),
    );
    return { output: unb64(r.output), code: r.code };
  };
  const policy = async (name: string, allow: string[]) =>
    backend.applyNetworkPolicy({ id: id(), op: 'apply_network_policy', name, allow });
  const fetch = (name: string, url: string, extra = '') => sh(name, `curl -sS -m 3 ${extra} ${url}`);

  it('runs commands confined: /home/sprite is the sandbox, the host is read-only, its secrets and the other sandboxes hidden', async () => {
    await create('conf');
    await create('other');
    value(
      await backend.writeFile({
        id: id(),
        op: 'write_file',
        name: 'other',
        path: '/home/sprite/secret',
        data: b64('x'),
      }),
    );
    value(
      await backend.writeFile({ id: id(), op: 'write_file', name: 'conf', path: '~/notes.txt', data: b64('mine') }),
    );
    value(
      await backend.writeFile({
        id: id(),
        op: 'write_file',
        name: 'conf',
        path: '/tmp/shared.txt',
        data: b64('tmp-file'),
      }),
    );
    const r = await sh(
      'conf',
      'echo "$HOME $(pwd) $(hostname)"; cat notes.txt; echo; cat /tmp/shared.txt; echo; ls /home; ls -A /root | wc -l; test -e ' +
        root +
        ' && echo visible || echo hidden; touch /usr/x 2>&1; echo pid1=$(cat /proc/1/comm)',
    );
    assert.equal(r.code, 0, r.output);
    const lines = r.output.split('\n');
    assert.equal(lines[0], '/home/sprite /home/sprite sprite');
    assert.equal(lines[1], 'mine');
    assert.equal(lines[2], 'tmp-file', 'write_file into /tmp lands in the sandbox private /tmp');
    assert.equal(lines[3], 'sprite', 'only this sandbox under /home');
    assert.equal(lines[4], '0', 'the daemon user home is hidden');
    assert.equal(lines[5], 'hidden', 'the runner root is hidden');
    assert.match(r.output, /Read-only file system/);
    assert.match(r.output, /pid1=bwrap/, 'own PID namespace');
    // The other sandbox's private /tmp is its own.
    assert.equal((await sh('other', 'test -e /tmp/shared.txt && echo seen || echo own')).output.trim(), 'own');
    const denied = await backend.writeFile({
      id: id(),
      op: 'write_file',
      name: 'conf',
      path: '/etc/passwd',
      data: b64('x'),
    });
    assert.equal(!denied.ok && denied.error.code, 'invalid');
    assert.equal((await sh('conf', 'exec no-such-command-here')).code, 127);
    const missing = value(
      await backend.exec({ id: id(), op: 'exec', name: 'conf', cmd: 'no-such-command', args: [], env: [] }),
    );
    assert.equal(missing.code, 127);
    const env = await sh('conf', 'printenv FOUNTAIN_API_KEY; echo "[$FOUNTAIN_SANDBOX_DIR]"');
    assert.equal(env.output.trim(), '[/home/sprite]');
  });

  it('puts every process in the sandbox cgroups with memory and pid limits', async () => {
    await create('limits');
    const parent = `fountain-test-${process.pid}`;
    for (const sub of readdirSync(join('/sys/fs/cgroup/memory', parent))) {
      if (!statSync(join('/sys/fs/cgroup/memory', parent, sub)).isDirectory()) continue;
      assert.equal(
        readFileSync(join('/sys/fs/cgroup/memory', parent, sub, 'memory.limit_in_bytes'), 'utf8').trim(),
        String(256 * 1024 * 1024),
      );
      assert.equal(readFileSync(join('/sys/fs/cgroup/pids', parent, sub, 'pids.max'), 'utf8').trim(), '64');
    }
    // Forking past the pid limit fails inside, whatever the command does.
    const r = await sh('limits', 'for i in $(seq 1 80); do sleep 2 & done; echo started');
    assert.match(r.output, /fork/i, r.output);
  });

  it('suspend freezes running processes and resume thaws them: the same session goes on', async () => {
    await create('park');
    const out = new CollectingOut();
    const reqId = id();
    const spawned = await backend.spawn(
      {
        id: reqId,
        op: 'spawn',
        name: 'park',
        cmd: 'sh',
        args: ['-c', 'i=0; while true; do i=$((i+1)); echo $i; sleep 0.05; done'],
        env: [],
      },
      { requestId: reqId, out },
    );
    const sid = value(spawned).session_id;
    assert.ok(spawned.ok);
    spawned.value.followUp?.();
    await until(() => out.bytes(sid).toString().split('\n').length > 3, 'counter output');
    value(await backend.suspend({ id: id(), op: 'suspend', name: 'park' }));
    assert.equal(value(await backend.get({ id: id(), op: 'get', name: 'park' })).status, 'suspended');
    const frozenAt = out.bytes(sid).length;
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(out.bytes(sid).length, frozenAt, 'no output while frozen');
    value(await backend.resume({ id: id(), op: 'resume', name: 'park' }));
    await until(() => out.bytes(sid).length > frozenAt, 'output after thaw');
    const numbers = out.bytes(sid).toString().trim().split('\n').map(Number);
    numbers.forEach((n, i) => assert.equal(n, i + 1, 'the same process counted on, without restarting'));
    assert.equal(out.exitCode(sid), undefined);
    value(await backend.destroy({ id: id(), op: 'destroy', name: 'park' }));
    await until(() => out.exitCode(sid) !== undefined, 'exit after destroy');
  });

  it('denies all egress by default and enforces allow lists by name, changeable at runtime', async () => {
    await create('net');
    const gw = (await sh('net', "ip route | awk '/default/ {print $3}'")).output.trim();
    assert.match(gw, /^10\.62\./);

    // Default: nothing resolves, nothing connects.
    let r = await fetch('net', 'http://allowed.test/');
    assert.notEqual(r.code, 0, r.output);
    assert.match(r.output, /resolve/i);

    value(await policy('net', ['allowed.test', '*.wild.test']));
    r = await fetch('net', 'http://allowed.test/');
    assert.equal(r.code, 0, r.output);
    assert.equal(r.output.trim(), 'hello allowed.test');
    r = await fetch('net', 'http://sub.wild.test/');
    assert.equal(r.output.trim(), 'hello sub.wild.test', 'a *. entry allows names below it');

    // Another name: refused by the resolver, and by the proxy when DNS is bypassed.
    r = await fetch('net', 'http://denied.test/');
    assert.match(r.output, /resolve/i);
    r = await fetch('net', 'http://denied.test/', `--resolve denied.test:80:${gw}`);
    assert.notEqual(r.code, 0, r.output);
    assert.doesNotMatch(r.output, /hello/);
    // Addresses directly: the test host, and a host service on the gateway, are both dropped.
    r = await fetch('net', `http://${inet.address}/`, '--connect-timeout 1');
    assert.notEqual(r.code, 0, r.output);
    const port = (hostListener.address() as { port: number }).port;
    r = await fetch('net', `http://${gw}:${port}/`, '--connect-timeout 1');
    assert.notEqual(r.code, 0, r.output);
    assert.doesNotMatch(r.output, /host service/);

    // allow: [] denies everything again, including the name allowed a moment ago.
    value(await policy('net', []));
    r = await fetch('net', 'http://allowed.test/', '--connect-timeout 1');
    assert.notEqual(r.code, 0, r.output);
    r = await fetch('net', 'http://allowed.test/', `--connect-timeout 1 --resolve allowed.test:80:${gw}`);
    assert.notEqual(r.code, 0, 'the firewall closes the proxy too');

    const bad = await policy('net', ['https://allowed.test/path']);
    assert.equal(!bad.ok && bad.error.code, 'invalid');
  });

  it('a policy change reaches a process that is already running', async () => {
    await create('live');
    value(await policy('live', ['allowed.test']));
    const out = new CollectingOut();
    const reqId = id();
    const loop =
      'while true; do if curl -s -m 1 --connect-timeout 1 http://allowed.test/ >/dev/null 2>&1; then echo OK; else echo FAIL; fi; sleep 0.1; done';
    const spawned = await backend.spawn(
      { id: reqId, op: 'spawn', name: 'live', cmd: 'sh', args: ['-c', loop], env: [] },
      { requestId: reqId, out },
    );
    assert.ok(spawned.ok);
    spawned.value.followUp?.();
    const sid = spawned.value.result.session_id;
    await until(() => out.bytes(sid).toString().includes('OK'), 'allowed while the policy allows');
    value(await policy('live', []));
    const mark = out.bytes(sid).toString().length;
    await until(() => out.bytes(sid).toString().slice(mark).includes('FAIL\nFAIL\n'), 'denied after allow: []');
    value(await policy('live', ['allowed.test']));
    const mark2 = out.bytes(sid).toString().length;
    await until(() => out.bytes(sid).toString().slice(mark2).includes('OK\nOK\n'), 'allowed again');
    assert.equal(out.exitCode(sid), undefined, 'the process was never restarted');
    value(await backend.destroy({ id: id(), op: 'destroy', name: 'live' }));
  });

  it('destroy removes the sandbox with its policy: a sandbox created again under the name starts denied', async () => {
    await create('keep');
    value(await policy('keep', ['allowed.test']));
    value(await backend.destroy({ id: id(), op: 'destroy', name: 'keep' }));
    const r = await backend.exec({ id: id(), op: 'exec', name: 'keep', cmd: 'true', args: [], env: [] });
    assert.equal(!r.ok && r.error.code, 'not_found');
    await create('keep');
    const fresh = await fetch('keep', 'http://allowed.test/');
    assert.notEqual(fresh.code, 0, 'a re-created sandbox starts denied');
  });

  it('a command sees the fixed base environment plus the request env, nothing of the runner (issue 22 #4)', async () => {
    process.env.RUNNER_ENV_MARKER_22 = 'leaked';
    try {
      await create('env');
      const r = value(
        await backend.exec({ id: id(), op: 'exec', name: 'env', cmd: 'env', args: ['-0'], env: [['ASKED', 'yes']] }),
      );
      const lines = unb64(r.output)
        .split('\0')
        .filter((l) => l !== '');
      // PWD is the launching shell's own (the working directory), nothing of the runner's.
      const keys = lines
        .map((l) => l.slice(0, l.indexOf('=')))
        .filter((k) => k !== 'PWD')
        .sort();
      // Trust-anchor paths (public CA bundles) pass when the runner has them, as on the process backend.
      const trust = TRUST_ENV_KEYS.filter((k) => process.env[k]);
      assert.deepEqual(
        keys,
        [
          'ASKED',
          'FOUNTAIN_SANDBOX_DIR',
          'HOME',
          'LANG',
          'PATH',
          'SHELL',
          'TERM',
          'TMPDIR',
          'USER',
          ...trust,
          'npm_config_cache',
          'npm_config_prefix',
        ].sort(),
      );
      assert.ok(
        lines.includes('HOME=/home/sprite') && lines.includes('TMPDIR=/tmp') && lines.includes('USER=sprite'),
        lines.join('\n'),
      );
      assert.ok(!lines.some((l) => l.includes('leaked')));
    } finally {
      delete process.env.RUNNER_ENV_MARKER_22;
    }
  });

  it('write_file (the daemon writes as root) never follows a link the sandbox planted (issue 22 #3)', async () => {
    await create('links');
    await create('sibling');
    const outside = join(root, '..', 'outside');
    mkdirSync(join(outside, 'dir'), { recursive: true });
    writeFileSync(join(outside, 'file'), 'host');
    writeFileSync(join(root, 'sibling', 'secret'), 'sibling');
    // The link texts are host paths the sandbox cannot see; the daemon on the host would follow them.
    const planted = await sh(
      'links',
      `ln -s ${outside}/file f && ln -s ${outside}/dir d && ln -s ${root}/sibling sib && echo "K=v" > .env && rm .env && ln -s ${outside}/file .env && ln -s ${outside}/dir /tmp/t`,
    );
    assert.equal(planted.code, 0, planted.output);
    const write = (path: string) =>
      backend.writeFile({ id: id(), op: 'write_file', name: 'links', path, data: b64('PWNED'), mode: null });
    for (const path of ['f', '/home/sprite/d/new.txt', 'sib/secret', '~/.env', '/tmp/t/x']) {
      const r = await write(path);
      assert.equal(!r.ok && r.error.code, 'invalid', path);
      assert.match(!r.ok ? r.error.detail : '', /is a symbolic link; write_file does not follow links/);
    }
    assert.equal(readFileSync(join(outside, 'file'), 'utf8'), 'host');
    assert.deepEqual(readdirSync(join(outside, 'dir')), []);
    assert.equal(readFileSync(join(root, 'sibling', 'secret'), 'utf8'), 'sibling');
    value(await write('/tmp/fine/x.txt'));
    assert.equal((await sh('links', 'cat /tmp/fine/x.txt')).output, 'PWNED');
  });

  it("an agent's own program runs inside wherever it is installed, read-only; get answers the path commands see (issue 22 #1)", async () => {
    await create('prog');
    assert.deepEqual(value(await backend.get({ id: id(), op: 'get', name: 'prog' })), {
      status: 'running',
      path: '/home/sprite',
    });
    const ran = await sh('prog', `sh ${install}/agent.sh`);
    assert.deepEqual(ran, { output: 'agent runs in /home/sprite\n', code: 0 });
    const written = await sh('prog', `echo x > ${install}/agent.sh`);
    assert.notEqual(written.code, 0);
    assert.match(written.output, /Read-only file system/);
    // This installation (the demo agent's entry point) and the Node running it, whatever their paths.
    const bin = join(defaultProgramDirs()[0]!, 'bin', 'fountain.js');
    const node = await sh('prog', `test -r ${bin} && ${process.execPath} -e 'console.log(process.version)'`);
    assert.deepEqual(node, { output: `${process.version}\n`, code: 0 });
  });

  it('cannot create a user namespace from inside: unshare -Ur and a raw clone(CLONE_NEWUSER) are refused; threads and forks still work', async () => {
    await create('userns');
    const r = await sh(
      'userns',
      [
        'unshare -Ur id -u 2>&1 && echo unshare-worked || echo unshare-refused',
        // The clone path too, without unshare(1): Python's os.unshare is the unshare syscall, so go through fork + unshare in perl.
        `perl -e 'require "syscall.ph"; my $r = syscall(272, 0x10000000); print $r == 0 ? "syscall-worked\n" : "syscall-refused $!\n"' 2>&1 || true`,
        `node -e 'const { Worker } = require("node:worker_threads"); new Worker("process.exit(0)", { eval: true }).on("exit", () => console.log("threads-ok"))'`,
        'echo $(echo forked) | cat',
      ].join('; '),
    );
    assert.match(r.output, /unshare-refused/, r.output);
    assert.doesNotMatch(r.output, /unshare-worked|syscall-worked/, r.output);
    assert.match(r.output, /threads-ok/, r.output);
    assert.match(r.output, /^forked$/m, r.output);
  });

  it('commands run as an unprivileged uid: root-only host files stay unreadable, the sandbox stays theirs (issue 22 #2)', async () => {
    await create('uid');
    value(
      await backend.writeFile({ id: id(), op: 'write_file', name: 'uid', path: '~/given.txt', data: b64('given') }),
    );
    const r = await sh(
      'uid',
      'id -u; id -un; cat /etc/shadow >/dev/null 2>&1 && echo shadow-read || echo shadow-denied; grep Cap[EPB] /proc/self/status; echo more >> given.txt && mkdir -p work/a && echo ok > /tmp/t && echo writes-ok',
    );
    assert.equal(r.code, 0, r.output);
    const lines = r.output.trim().split('\n');
    const uid = Number(lines[0]);
    assert.ok(uid >= 1000, `an unprivileged uid, got ${lines[0]}`);
    assert.equal(lines[1], 'sprite', 'the uid has a name inside');
    assert.equal(lines[2], 'shadow-denied');
    for (const cap of lines.slice(3, 6)) assert.match(cap, /:\s+0000000000000000$/, cap);
    assert.equal(lines[6], 'writes-ok');
    // What the daemon writes for the sandbox belongs to the sandbox's uid.
    assert.equal(statSync(join(root, 'uid', 'given.txt')).uid, uid);
    assert.equal(statSync(join(root, 'uid')).uid, uid);
    // Another sandbox runs under another uid.
    await create('uid2');
    assert.notEqual(Number((await sh('uid2', 'id -u')).output.trim()), uid);
  });
});
