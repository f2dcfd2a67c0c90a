/**
 * A second machine becomes a runner with one command: a fresh HOME and a PATH holding only node, sh, curl
 * and a few coreutils (no checkout, no node_modules) run `curl -fsSL <server>/runner/install.sh | sh -s --`
 * against a real server; the runner comes online and runs a demo conversation; re-running upgrades;
 * `fountain-runner update` moves it to the server's version while a turn runs; bad inputs get their sentence.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { type Server, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { allEvents, answerText, until } from '../src/server/conversations/testing.ts';
import type { EventRow } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { call } from './helpers/http.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

interface BundleModule {
  buildRunnerBundle(packageVersion?: string): Promise<Uint8Array>;
  describeRunnerArtifact(bytes: Uint8Array, packageVersion?: string): { version: string; sha256: string };
}
const bundle = () => import(new URL('../bin/runner-bundle.mjs', import.meta.url).href) as Promise<BundleModule>;

/** What the second machine has on its PATH: no checkout, no npm, no node_modules. */
const TOOLS = ['node', 'sh', 'curl', 'mkdir', 'mktemp', 'rm', 'mv', 'ln', 'chmod', 'cat', 'id', 'uname', 'sha256sum'];

interface Machine {
  readonly home: string;
  readonly bin: string;
  readonly env: Record<string, string>;
  readonly launcher: string;
}

/**
 * Where each tool is on this machine, looked up once at load, before the server starts: a lookup per
 * machine was a dozen spawnSync calls, and a loop blocked that long on a loaded machine let the server's
 * keep-alive timer close a pooled socket right after the next request had been written to it (ECONNRESET).
 */
const TOOL_PATHS = new Map(
  TOOLS.map((t) => [t, spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim()]),
);

function machine(parent: string, name: string, tools = TOOLS): Machine {
  const dir = join(parent, name);
  const home = join(dir, 'home');
  const bin = join(dir, 'bin');
  mkdirSync(home, { recursive: true });
  mkdirSync(bin, { recursive: true });
  for (const t of tools) {
    const found = TOOL_PATHS.get(t);
    assert.ok(found, `${t} is on this machine`);
    symlinkSync(found, join(bin, t));
  }
  return {
    home,
    bin,
    env: { HOME: home, PATH: bin, LANG: 'C.UTF-8' },
    launcher: join(home, '.local', 'bin', 'fountain-runner'),
  };
}

interface Run {
  readonly child: ChildProcess;
  readonly out: () => string;
  readonly exited: Promise<number | null>;
}

function sh(m: Machine, script: string, extraEnv: Record<string, string> = {}): Run {
  // Its own process group, so stopping it reaches the launcher's node as Ctrl-C would.
  const child = spawn('/bin/sh', ['-c', script], {
    cwd: m.home,
    env: { ...m.env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, out: () => out, exited };
}

/** A node child run to its end, without blocking this process's event loop. */
function runNode(
  args: string[],
  opts: { env: NodeJS.ProcessEnv },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, args, { env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((r) => child.once('close', (status) => r({ status, stdout, stderr })));
}

const stopGroup = async (r: Run | null) => {
  if (!r || r.child.exitCode !== null || r.child.signalCode !== null) return;
  try {
    process.kill(-r.child.pid!, 'SIGTERM');
  } catch {
    return;
  }
  const t = setTimeout(() => {
    try {
      process.kill(-r.child.pid!, 'SIGKILL');
    } catch {}
  }, 8000);
  await r.exited;
  clearTimeout(t);
};

/** A loopback proxy to the server that flips one byte of the artifact: what a corrupted download looks like. */
async function corruptingProxy(target: number): Promise<Server> {
  const server = createServer((req, res) => {
    const up = request(
      { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers },
      (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => {
          const body = Buffer.concat(chunks);
          if (req.url === '/runner/artifact')
            body.writeUInt8(body.readUInt8(body.length - 10) ^ 0x20, body.length - 10);
          res.writeHead(r.statusCode ?? 502, { 'content-type': r.headers['content-type'] ?? 'text/plain' });
          res.end(body);
        });
      },
    );
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

const noCurl = spawnSync('sh', ['-c', 'command -v curl'], { encoding: 'utf8' }).stdout.trim()
  ? false
  : 'curl is not installed (the second machine downloads with it)';

describe('a second machine installs a runner from the server', { timeout: 600_000, skip: noCurl }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let served: { version: string; sha256: string };
  let older: { version: string; bytes: Uint8Array };
  let far: Machine;
  let foreground: Run | null = null;
  const runs: Run[] = [];
  const servers: Server[] = [];

  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const token = async (): Promise<string> => {
    const r = await api('POST', '/api/runners/registrations');
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.data.token as string;
  };
  const installLine = (args: string, url = srv.url) => `curl -fsSL ${url}/runner/install.sh | sh -s -- ${args}`;
  const runnerNamed = async (name: string): Promise<Json> =>
    ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === name);
  /**
   * Whether `far` is online at `version`, from one read of the list: two reads can straddle a reconnect
   * and join the last runner's version to the next one's presence. With `since`, only a connection made
   * after it counts: a listing reads the rows before it asks who is online, so an offline row's old
   * version can show beside a runner that came online in between.
   */
  const farRunsOnline = async (version: string, since = 0): Promise<boolean> => {
    const r = await runnerNamed('far');
    return r?.version === version && r.online === true && Date.parse(r.connected_at) >= since;
  };
  const events = (id: string): Promise<EventRow[]> => allEvents(srv.database.db as unknown as EngineDb, id);
  const turnDone = (id: string, afterId = 0) =>
    until(
      async () => (await events(id)).find((e) => e.id > afterId && e.stage === 'turn' && e.state === 'done'),
      'the turn to finish',
      120_000,
    );

  /** Installs `older` beside the others and points `current` at it, as an earlier install would have left it. */
  const installOlder = (m: Machine) => {
    const dir = join(m.home, '.fountain', 'runner');
    mkdirSync(join(dir, older.version), { recursive: true });
    writeFileSync(join(dir, older.version, 'fountain-runner.mjs'), older.bytes, { mode: 0o755 });
    symlinkSync(older.version, join(dir, '.older'));
    renameSync(join(dir, '.older'), join(dir, 'current'));
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-install-')));
    srv = await startServer({ dataDir: join(tmp, 'server'), port: 0, env: {} });
    key = srv.bootstrapKey!;
    served = (await (await fetch(`${srv.url}/runner/manifest.json`)).json()) as { version: string; sha256: string };
    const b = await bundle();
    const bytes = await b.buildRunnerBundle('0.0.1');
    older = { version: b.describeRunnerArtifact(bytes, '0.0.1').version, bytes };
    far = machine(tmp, 'far');
  });

  after(async () => {
    await stopGroup(foreground);
    for (const r of runs) await stopGroup(r);
    for (const s of servers) await new Promise((r) => s.close(r));
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('serves a manifest whose sha256 is the artifact it serves', async () => {
    const res = await fetch(`${srv.url}/runner/artifact`);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(createHash('sha256').update(bytes).digest('hex'), served.sha256);
    assert.match(served.version, /^\d+\.\d+\.\d+\+[0-9a-f]{12}$/);
    assert.equal(res.headers.get('x-fountain-runner-version'), served.version);
    const script = await (await fetch(`${srv.url}/runner/install.sh`)).text();
    assert.match(script, /^#!\/bin\/sh\n/);
    assert.ok(script.includes(`FOUNTAIN_URL='${srv.url}'`), 'the script names the server it came from');
  });

  it('`fountain runners add` prints the line, and says a loopback address reaches this machine only', async () => {
    // Not spawnSync: the server runs in this process and must answer while the CLI waits.
    const r = await runNode([fileURLToPath(new URL('../bin/fountain.js', import.meta.url)), 'runners', 'add'], {
      env: {
        ...process.env,
        FOUNTAIN_HOME: join(tmp, 'cli'),
        FOUNTAIN_API_KEY: key,
        FOUNTAIN_BASE_URL: srv.url,
        FOUNTAIN_PROFILE: '',
      },
    });
    assert.equal(r.status, 0, r.stderr);
    const line = new RegExp(
      `^  curl -fsSL ${srv.url.replace(/[.]/g, '\\.')}/runner/install\\.sh \\| sh -s -- --token ftr_[0-9a-f]{48}$`,
      'm',
    );
    assert.match(r.stdout, line);
    assert.match(
      r.stdout,
      new RegExp(`${srv.url.replace(/[.]/g, '\\.')} is a loopback address, so other machines cannot reach it`),
    );
  });

  it('each bad input gets one plain sentence, a non-zero exit, and nothing installed', async () => {
    const cases: Array<{ what: string; m: Machine; line: string; expect: RegExp }> = [];
    const unknown = `ftr_${'ab'.repeat(24)}`;
    cases.push({
      what: 'a token the server does not know',
      m: machine(tmp, 'bad-token'),
      line: installLine(`--token ${unknown} --name bad`),
      expect: /registration refused: this registration token is not known to this server/,
    });
    cases.push({
      what: 'a malformed token',
      m: machine(tmp, 'malformed'),
      line: installLine('--token ftr_nothex'),
      expect: /--token must be the ftr_… token "Add runner" shows; this one is malformed\./,
    });
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    cases.push({
      what: 'an unreachable server',
      m: machine(tmp, 'unreachable'),
      line: installLine(`--token ${await token()} --url http://127.0.0.1:${closedPort}`),
      expect: new RegExp(`cannot reach the Fountain server at http://127\\.0\\.0\\.1:${closedPort}: check the address`),
    });
    const proxy = await corruptingProxy(srv.port);
    servers.push(proxy);
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    cases.push({
      what: 'a corrupted download',
      m: machine(tmp, 'corrupt'),
      line: installLine(`--token ${await token()}`, proxyUrl),
      expect:
        /the downloaded runner does not match the checksum the server published \(expected [0-9a-f]{64}, got [0-9a-f]{64}\); nothing was installed\./,
    });
    const unwritable = machine(tmp, 'unwritable');
    // A file where the directory should be: unwritable even for root.
    writeFileSync(join(unwritable.home, '.fountain'), 'not a directory');
    cases.push({
      what: 'an unwritable directory',
      m: unwritable,
      line: installLine(`--token ${await token()}`),
      expect: /cannot write to .*\/\.fountain\/runner: make it writable or set HOME/,
    });
    const noNode = machine(
      tmp,
      'no-node',
      TOOLS.filter((t) => t !== 'node'),
    );
    cases.push({
      what: 'no Node.js',
      m: noNode,
      line: installLine(`--token ${await token()}`),
      expect: /Node\.js is not installed \(no node on PATH\): install Node\.js 20 LTS or newer/,
    });

    // The second machine's PATH has none of what the namespace backend needs.
    cases.push({
      what: 'a backend whose packages are missing',
      m: machine(tmp, 'no-bwrap'),
      line: installLine(`--token ${await token()} --backend namespace`),
      expect:
        process.getuid?.() === 0
          ? /the namespace backend needs packages this machine lacks: bubblewrap util-linux iproute2 nftables \(Debian\/Ubuntu: apt-get install bubblewrap util-linux iproute2 nftables\)\./
          : /the namespace backend runs as root/,
    });

    for (const c of cases) {
      const r = sh(c.m, c.line);
      runs.push(r);
      const code = await r.exited;
      assert.notEqual(code, 0, `${c.what}: exit ${code}\n${r.out()}`);
      assert.match(r.out(), c.expect, c.what);
      const lines = r.out().trim().split('\n');
      assert.equal(lines.length, 1, `${c.what}: one sentence, got:\n${r.out()}`);
      const dir = join(c.m.home, '.fountain', 'runner');
      const left = existsSync(dir) ? readdirSync(dir) : [];
      assert.deepEqual(left, [], `${c.what}: nothing installed`);
      assert.ok(!existsSync(join(c.m.home, '.local', 'bin', 'fountain-runner')), `${c.what}: no launcher`);
    }
  });

  it('the one command installs, enrolls and starts a runner that runs a demo conversation', async () => {
    const t = await token();
    foreground = sh(far, installLine(`--token ${t} --name far --bin-dir ${join(far.home, '.local', 'bin')}`));
    await until(async () => (await runnerNamed('far'))?.online, 'the new runner to come online', 120_000);
    assert.match(
      foreground.out(),
      /installed fountain-runner \S+ in \S+\/\.fountain\/runner\/\S+, launcher \S+\/\.local\/bin\/fountain-runner/,
    );
    assert.equal((await runnerNamed('far')).version, served.version);
    assert.equal(readlinkSync(join(far.home, '.fountain', 'runner', 'current')), served.version);
    assert.match(readFileSync(join(far.home, '.fountain', 'credentials'), 'utf8'), /\[runner\.far\]/);

    const agent = await api('POST', '/api/agents', { name: 'far-demo', runtime: 'demo', model: 'fountain/demo' });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const conv = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'hello' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const done = await turnDone(conv.body.data.id);
    assert.ok(
      answerText(await events(conv.body.data.id), JSON.parse(done.data).turn_id).length > 0,
      'the agent answered',
    );
    const sandboxes = readdirSync(join(far.home, '.fountain', 'runners', 'far', 'sandboxes'));
    assert.ok(
      sandboxes.some((n) => n.startsWith('runner-')),
      `the computer lives on the new machine: ${sandboxes}`,
    );
    // The demo agent runs from the installed runner, not from the server's checkout (absent on another machine).
    const agents = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .flatMap((pid) => {
        try {
          const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
          return args.includes('demo-agent') && args.some((a) => a.includes(far.home)) ? [args.join(' ')] : [];
        } catch {
          return [];
        }
      });
    assert.ok(
      agents.some((a) => a.includes(join(far.home, '.fountain', 'runner'))),
      `the demo agent runs from ${join(far.home, '.fountain', 'runner')}: ${agents.join(' | ') || 'none found'}`,
    );
    const term = await api('POST', `/api/conversations/${conv.body.data.id}/terminate`);
    assert.ok(term.status < 300, JSON.stringify(term.body));
  });

  it('re-running the command upgrades in place, and --service writes a unit systemd accepts', async () => {
    // As if an earlier, older install were running: it restarts into the older version `current` names.
    installOlder(far);
    await until(
      async () => (await runnerNamed('far'))?.version === older.version,
      'the runner to run the older version',
      60_000,
    );

    const units = join(tmp, 'units');
    const again = sh(
      far,
      installLine(`--token ${await token()} --name far --service --bin-dir ${join(far.home, '.local', 'bin')}`),
      { FOUNTAIN_SYSTEMD_UNIT_DIR: units },
    );
    runs.push(again);
    assert.equal(await again.exited, 0, again.out());
    assert.equal(readlinkSync(join(far.home, '.fountain', 'runner', 'current')), served.version);
    await until(() => farRunsOnline(served.version), 'the running runner to move to the server’s version', 60_000);
    const unitPath = join(units, 'fountain-runner-far.service');
    const unit = readFileSync(unitPath, 'utf8');
    assert.match(unit, /^Restart=always$/m);
    assert.match(unit, /^ExecStart=\S+\/\.local\/bin\/fountain-runner "--name" "far" --log-format json$/m);
    assert.match(again.out(), /logs: journalctl\s+-u fountain-runner-far\.service -f/);

    const analyze = spawnSync('sh', ['-c', 'command -v systemd-analyze'], { encoding: 'utf8' }).stdout.trim();
    if (!analyze) {
      process.stdout.write('# systemd-analyze is not installed: the unit was not verified\n');
      return;
    }
    const verify = spawnSync(analyze, ['verify', unitPath], { encoding: 'utf8' });
    assert.equal(verify.status, 0, `systemd-analyze verify: ${verify.stderr}`);
    assert.doesNotMatch(verify.stderr, /fountain-runner-far/);
  });

  it('`fountain-runner update` moves the runner from an older artifact to the server’s while a turn runs', async () => {
    installOlder(far);
    await until(
      async () => (await runnerNamed('far'))?.version === older.version,
      'the runner to run the older version',
      60_000,
    );
    const agent = await api('POST', '/api/agents', { name: 'far-slow', runtime: 'demo', model: 'fountain/demo' });
    const conv = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'hello' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = conv.body.data.id as string;
    const first = await turnDone(id);
    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'slow: 20 150ms' });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const turnId = p.body.turn_id as string;
    await until(async () => answerText(await events(id), turnId).split('\n').length > 3, 'the turn to be under way');

    const update = sh(far, `${far.launcher} update`);
    runs.push(update);
    assert.equal(await update.exited, 0, update.out());
    assert.match(
      update.out(),
      new RegExp(`${older.version.replace(/\+/g, '\\+')} → ${served.version.replace(/\+/g, '\\+')}`),
    );
    assert.equal(readlinkSync(join(far.home, '.fountain', 'runner', 'current')), served.version);

    const done = await turnDone(id, first.id);
    assert.equal(JSON.parse(done.data).turn_id, turnId);
    const text = answerText(await events(id), turnId);
    for (let i = 1; i <= 20; i++) assert.equal(text.split(`slow chunk ${i} of 20`).length, 2, `chunk ${i} once`);
    assert.equal((await runnerNamed('far')).version, older.version, 'the runner waits for its sessions');

    // Once its sessions end, the daemon restarts into the installed version.
    const term = await api('POST', `/api/conversations/${id}/terminate`);
    assert.ok(term.status < 300, JSON.stringify(term.body));
    await until(() => farRunsOnline(served.version), 'the runner to restart into the server’s version', 60_000);
    const same = sh(far, `${far.launcher} update`);
    runs.push(same);
    assert.equal(await same.exited, 0, same.out());
    assert.match(same.out(), /is the server's version; nothing to do/);
  });

  it('with --auto-update the daemon installs the server’s version by itself when it connects', async () => {
    await stopGroup(foreground);
    await until(async () => !(await runnerNamed('far'))?.online, 'the foreground runner to stop', 60_000);
    installOlder(far);
    // The row still names the server's version (the runner just stopped ran it): only a later connection counts.
    const launched = Date.now();
    foreground = sh(far, `${far.launcher} --name far --auto-update`);
    await until(
      () => farRunsOnline(served.version, launched),
      'the auto-updating runner to move to the server’s version',
      120_000,
    );
    assert.equal(readlinkSync(join(far.home, '.fountain', 'runner', 'current')), served.version);
    assert.match(foreground.out(), /auto-update installed the server/);
  });
});
