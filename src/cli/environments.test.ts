import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FOUNTAIN_BIN } from '../server/conversations/testing.ts';
import { startServer, type RunningServer } from '../server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../server/store/testing.ts';

describe('fountain environments against a real server', () => {
  const schema = uniqueSchemaName();
  const SECRET = `cli-secret-${randomBytes(8).toString('hex')}`;
  let tmp: string;
  let srv: RunningServer;
  const cli = (args: string[], stdin = ''): Promise<{ code: number | null; out: string; err: string }> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [FOUNTAIN_BIN, ...args], {
        env: {
          ...process.env,
          FOUNTAIN_API_KEY: srv.bootstrapKey!,
          FOUNTAIN_BASE_URL: srv.url,
          FOUNTAIN_PROFILE: '',
          FOUNTAIN_HOME: tmp,
          HOME: tmp,
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.stdin.end(stdin);
      child.on('close', (code) => resolve({ code, out, err }));
    });

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cli-envs-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
  });
  after(async () => {
    await srv?.stop();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('creates, shows, sets a secret from stdin, lists, attaches to an agent and deletes', async () => {
    const created = await cli([
      'environments',
      'create',
      '--name',
      'web',
      '--var',
      'NODE_ENV=test',
      '--npm',
      'left-pad',
      '--repo',
      'https://example.test/org/app.git',
      '--setup',
      'make',
      '--limited',
      'example.test,registry.npmjs.org',
    ]);
    assert.equal(created.code, 0, created.err);
    assert.match(created.out, /created environment web/);
    const set = await cli(['env', 'secrets', 'set', 'web', 'API_TOKEN'], `${SECRET}\n`);
    assert.equal(set.code, 0, set.err);
    const shown = await cli(['environments', 'show', 'web']);
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /network: limited \(example\.test, registry\.npmjs\.org\)/);
    assert.match(shown.out, /secrets: API_TOKEN/);
    assert.match(shown.out, /repository: https:\/\/example\.test\/org\/app\.git -> \/home\/sprite\/app/);
    const json = await cli(['environments', 'show', 'web', '--json']);
    const listed = await cli(['environments', 'list']);
    assert.match(listed.out, /web\s+limited\s+1\s+1\s+1/);
    assert.ok(
      ![created, set, shown, json, listed].some((r) => (r.out + r.err).includes(SECRET)),
      'the secret is never printed',
    );
    const agent = await cli([
      'agents',
      'create',
      '--name',
      'a',
      '--runtime',
      'demo',
      '--model',
      'fountain/demo',
      '--environment',
      'web',
      '--json',
    ]);
    assert.equal(agent.code, 0, agent.err);
    assert.equal(JSON.parse(agent.out).environment_id, JSON.parse(json.out).id);
    const bad = await cli(['environments', 'create', '--name', 'bad', '--repo', 'http://example.test/x.git']);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /only https/);
    assert.equal((await cli(['env', 'secrets', 'delete', 'web', 'API_TOKEN'])).code, 0);
    assert.equal((await cli(['environments', 'delete', 'web'])).code, 0);
    const none = await cli(['environments', 'show', 'web']);
    assert.notEqual(none.code, 0);
    assert.match(none.err, /no environment "web"/);
  });
});
