/**
 * `fountain credentials set|list|rm` as a real process against a real server: the value comes from
 * stdin, never a flag, and no output ever shows it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../server/start.ts';
import { startOpenAiApi } from '../../test/model-apis/openai.ts';
import type { ModelApiServer } from '../../test/model-apis/server.ts';

const BIN = new URL('../../bin/fountain.js', import.meta.url).pathname;
const KEY = 'sk-proj-cli0123456789abcdef0123456789';

function fountain(
  args: string[],
  env: Record<string, string>,
  stdin = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, FOUNTAIN_PROFILE: '', FOUNTAIN_LOG_FORMAT: 'json', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(stdin);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('fountain credentials (real process, real server)', () => {
  let dir: string;
  let srv: RunningServer;
  let api: ModelApiServer;
  let env: Record<string, string>;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-cli-creds-'));
    srv = await startServer({ dataDir: join(dir, 'data'), port: 0, env: {} });
    api = await startOpenAiApi(KEY);
    env = { FOUNTAIN_API_KEY: srv.bootstrapKey!, FOUNTAIN_BASE_URL: srv.url, FOUNTAIN_HOME: join(dir, 'home') };
  });
  after(async () => {
    await srv?.stop();
    await api?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sets from stdin (validated against the provider), lists without the value, removes', async () => {
    const refused = await fountain(
      ['credentials', 'set', 'openai_api_key', '--base-url', `${api.url}/v1`],
      env,
      'sk-proj-wrong\n',
    );
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /refused/);
    const set = await fountain(
      ['credentials', 'set', 'openai_api_key', '--base-url', `${api.url}/v1`],
      env,
      `${KEY}\n`,
    );
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /stored openai_api_key \(base URL http:\/\/127\.0\.0\.1:\d+\/v1\)/);
    const list = await fountain(['credentials', 'list'], env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /openai_api_key\s+default\s+http:\/\/127\.0\.0\.1:\d+\/v1/);
    const bad = await fountain(['credentials', 'set', 'aws_key'], env, 'x\n');
    assert.equal(bad.code, 2);
    const rm = await fountain(['credentials', 'rm', 'openai_api_key'], env);
    assert.equal(rm.code, 0, rm.stderr);
    assert.doesNotMatch((await fountain(['credentials', 'list'], env)).stdout, /openai_api_key/);
    for (const r of [refused, set, list, bad, rm]) assert.ok(!(r.stdout + r.stderr).includes(KEY));
  });

  it('keeps named credential sets apart (--name) and refuses to remove one an agent uses', async () => {
    const work = await fountain(
      ['credentials', 'set', 'openai_api_key', '--name', 'work', '--no-validate'],
      env,
      `${KEY}\n`,
    );
    assert.equal(work.code, 0, work.stderr);
    assert.match(work.stdout, /stored openai_api_key in set work/);
    const badName = await fountain(['credentials', 'set', 'openai_api_key', '--name', 'Work Set'], env, `${KEY}\n`);
    assert.equal(badName.code, 2);
    assert.match(badName.stderr, /credential set name/);
    assert.match((await fountain(['credentials', 'list'], env)).stdout, /openai_api_key\s+work\s+\(vendor API\)/);
    const agent = await fountain(
      [
        'agents',
        'create',
        '--name',
        'coder',
        '--runtime',
        'codex',
        '--model',
        'openai/gpt-5',
        '--credential-set',
        'work',
      ],
      env,
    );
    assert.equal(agent.code, 0, agent.stderr);
    const inUse = await fountain(['credentials', 'rm', 'openai_api_key', '--name', 'work'], env);
    assert.notEqual(inUse.code, 0);
    assert.match(inUse.stderr, /used by agent coder/);
    assert.equal((await fountain(['agents', 'delete', 'coder'], env)).code, 0);
    const rm = await fountain(['credentials', 'rm', 'openai_api_key', '--name', 'work'], env);
    assert.equal(rm.code, 0, rm.stderr);
    assert.match(rm.stdout, /removed openai_api_key of set work/);
    for (const r of [work, badName, inUse, rm]) assert.ok(!(r.stdout + r.stderr).includes(KEY));
  });
});
