/**
 * The server and runner images, run as containers (`--network host`, free loopback ports) and used
 * only from outside: a demo conversation through the public API lands on the runner container and
 * completes; both HEALTHCHECKs report healthy, and the runner's turns unhealthy when its server goes.
 * Runs where the images exist (scripts/images/ci.sh builds them); FOUNTAIN_IMAGE_TESTS=1 makes absence a failure.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '../src/server/conversations/testing.ts';
import { answer, call, openStream, type Json } from './helpers/http.ts';

const SERVER_IMAGE = process.env.FOUNTAIN_SERVER_IMAGE ?? 'fountain-server:ci';
const RUNNER_IMAGE = process.env.FOUNTAIN_RUNNER_IMAGE ?? 'fountain-runner:ci';
const REQUIRED = process.env.FOUNTAIN_IMAGE_TESTS === '1';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function docker(args: readonly string[]): Promise<Ran> {
  return new Promise((resolve) => {
    execFile('docker', args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 127) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr || (err && !stderr ? err.message : '')) });
    });
  });
}

async function dockerOk(args: readonly string[]): Promise<string> {
  const r = await docker(args);
  assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** Why the test cannot run here, or null when the engine answers and both images exist. */
async function missing(): Promise<string | null> {
  const engine = await docker(['version', '--format', '{{.Server.Version}}']);
  if (engine.code !== 0)
    return `no Docker engine answers (${engine.stderr.trim().split('\n')[0]}); scripts/images/ci.sh starts one and builds the images`;
  for (const image of [SERVER_IMAGE, RUNNER_IMAGE])
    if ((await docker(['image', 'inspect', image])).code !== 0)
      return `the image ${image} is not built: scripts/images/ci.sh builds it`;
  return null;
}

/** A port nothing listens on now, on loopback (the containers share the host's network). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const health = async (name: string) => dockerOk(['inspect', '--format', '{{.State.Health.Status}}', name]);

const why = await missing();
const skip = why && !REQUIRED ? why : false;

describe('the server and runner images, run as containers', { skip }, () => {
  const suffix = randomBytes(4).toString('hex');
  const serverName = `fountain-test-server-${suffix}`;
  const runnerName = `fountain-test-runner-${suffix}`;
  const key = `ftn_${randomBytes(32).toString('hex')}`;
  let tmp: string;
  let base: string;
  const api = (method: string, path: string, body?: unknown) => call(base, key, method, path, body);
  const logs = async (name: string) => {
    const r = await docker(['logs', '--tail', '40', name]);
    return `${r.stdout}${r.stderr}`;
  };

  before(async () => {
    if (why) throw new Error(why);
    tmp = mkdtempSync(join(tmpdir(), 'fountain-images-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // Keys go to the containers in files, never on a command line another process could list.
    const serverEnv = join(tmp, 'server.env');
    writeFileSync(
      serverEnv,
      `FOUNTAIN_BOOTSTRAP_KEY=${key}\nFOUNTAIN_HEALTH_URL=${base}/health/ready\nPUBLIC_URL=${base}\n`,
      { mode: 0o600 },
    );
    const runnerEnv = join(tmp, 'runner.env');
    writeFileSync(runnerEnv, `FOUNTAIN_BASE_URL=${base}\nFOUNTAIN_API_KEY=${key}\n`, { mode: 0o600 });

    // The images' own health commands, checked every 2 s instead of their production intervals.
    const fast = ['--health-interval', '2s', '--health-retries', '2', '--health-start-period', '120s'];
    await dockerOk([
      'run',
      '--detach',
      '--name',
      serverName,
      '--network',
      'host',
      '--env-file',
      serverEnv,
      ...fast,
      SERVER_IMAGE,
      'server',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--data-dir',
      '/var/lib/fountain',
    ]);
    await until(
      async () => (await fetch(`${base}/health/ready`).catch(() => null))?.ok,
      `the server container ready on ${base}`,
      120_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${await logs(serverName)}`);
    });
    await dockerOk([
      'run',
      '--detach',
      '--name',
      runnerName,
      '--network',
      'host',
      '--env-file',
      runnerEnv,
      ...fast,
      RUNNER_IMAGE,
      '--name',
      `image-${suffix}`,
    ]);
  });

  after(async () => {
    for (const name of [runnerName, serverName]) await docker(['rm', '--force', '--volumes', name]);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('runs both as non-root users', async () => {
    for (const name of [serverName, runnerName]) {
      const uid = await dockerOk(['exec', name, 'id', '-u']);
      assert.notEqual(uid, '0', `${name} runs as uid ${uid}`);
    }
  });

  it('the runner comes online and both report healthy', async () => {
    await until(
      async () =>
        ((await api('GET', '/api/runners')).body?.data as Json[] | undefined)?.some(
          (r) => r.name === `image-${suffix}` && r.online === true,
        ),
      'the runner container online',
      60_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${await logs(runnerName)}`);
    });
    await until(async () => (await health(serverName)) === 'healthy', 'the server container healthy', 60_000);
    await until(async () => (await health(runnerName)) === 'healthy', 'the runner container healthy', 60_000);
  });

  it('holds a demo conversation on the runner container', async () => {
    const agent = await api('POST', '/api/agents', {
      name: `images-${suffix}`,
      runtime: 'demo',
      model: 'fountain/demo',
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    assert.equal(conv.sandbox.provider, 'runner');
    assert.equal(conv.sandbox.runner.name, `image-${suffix}`);
    const s = openStream(`${base}/api/conversations/${conv.id}/stream`, key);
    try {
      await s.stage('provision', 'done');
      const sent = await api('POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: `remember: the container code is ${suffix}`,
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const done = await s.wait(
        (e) => e.data?.stage === 'turn' && e.data?.state === 'done' && e.data?.turn_id === sent.body.turn_id,
        'the turn done',
      );
      assert.match(
        answer(s.events, done.data.turn_id),
        new RegExp(`I will remember that: the container code is ${suffix}`),
      );
    } finally {
      s.close();
    }
  });

  it("the runner's health check turns unhealthy when its server is gone", async () => {
    await dockerOk(['stop', '--time', '10', serverName]);
    await until(async () => (await health(runnerName)) === 'unhealthy', 'the runner container unhealthy', 60_000);
  });
});
