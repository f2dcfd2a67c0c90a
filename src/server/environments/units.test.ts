import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RUNTIME_SPECS } from '../runtimes/table.ts';
import { Private } from '../../sandbox/private.ts';
import { deliverMcp, mergeRuntimeFile } from './mcp.ts';
import { McpServerSchema } from './schemas.ts';
import { planLaunch } from './plan.ts';
import { hostAllowed, packageCommands, scrubber } from './steps.ts';
import type { McpServer } from '../store/environment-schema.ts';

const servers: Record<string, McpServer> = {
  files: { command: 'mcp-files', args: ['--root', '${ROOT}'], env: { TOKEN: '${API_TOKEN}' } },
  docs: { type: 'http', url: 'https://${HOST}/mcp', headers: { Authorization: 'Bearer ${API_TOKEN}' } },
};
const vars = new Map([
  ['ROOT', '/home/sprite/app'],
  ['HOST', 'docs.example.test'],
  ['API_TOKEN', 'sekrit-value'],
]);
const secretKeys = new Set(['API_TOKEN']);

describe('MCP delivery per runtime', () => {
  it('claude: <cwd>/.mcp.json plus enableAllProjectMcpServers; secrets stay ${KEY} references', () => {
    const r = deliverMcp(RUNTIME_SPECS.claude, servers, vars, secretKeys);
    assert.ok(r.ok);
    assert.deepEqual(
      r.value.files.map((f) => f.path),
      ['/home/sprite/.mcp.json', '/home/sprite/.claude/settings.json'],
    );
    assert.deepEqual(JSON.parse(r.value.files[0]!.content), {
      mcpServers: {
        files: { command: 'mcp-files', args: ['--root', '/home/sprite/app'], env: { TOKEN: '${API_TOKEN}' } },
        docs: { type: 'http', url: 'https://docs.example.test/mcp', headers: { Authorization: 'Bearer ${API_TOKEN}' } },
      },
    });
    assert.deepEqual(JSON.parse(r.value.files[1]!.content), { enableAllProjectMcpServers: true });
    assert.deepEqual(r.value.session, []);
    assert.ok(!r.value.files.some((f) => f.content.includes('sekrit-value')));
  });

  it('gemini: $HOME/.gemini/settings.json with httpUrl for streamable http', () => {
    const r = deliverMcp(RUNTIME_SPECS.gemini, servers, vars, secretKeys);
    assert.ok(r.ok);
    assert.deepEqual(
      r.value.files.map((f) => f.path),
      ['/home/sprite/.gemini/settings.json'],
    );
    const s = JSON.parse(r.value.files[0]!.content);
    assert.deepEqual(s.mcpServers.docs, {
      httpUrl: 'https://docs.example.test/mcp',
      headers: { Authorization: 'Bearer ${API_TOKEN}' },
    });
    assert.deepEqual(s.mcpServers.files.env, { TOKEN: '${API_TOKEN}' });
  });

  it('codex and opencode: ACP session/new mcpServers, resolved, env and headers as name/value pairs', () => {
    for (const runtime of ['codex', 'opencode'] as const) {
      const r = deliverMcp(RUNTIME_SPECS[runtime], servers, vars, secretKeys);
      assert.ok(r.ok);
      assert.deepEqual(
        r.value.files.map((f) => JSON.parse(f.content)),
        runtime === 'opencode' ? [{ permission: { 'files_*': 'ask', 'docs_*': 'ask' } }] : [],
      );
      assert.deepEqual(r.value.session, [
        {
          name: 'files',
          command: 'mcp-files',
          args: ['--root', '/home/sprite/app'],
          env: [{ name: 'TOKEN', value: 'sekrit-value' }],
        },
        {
          type: 'http',
          name: 'docs',
          url: 'https://docs.example.test/mcp',
          headers: [{ name: 'Authorization', value: 'Bearer sekrit-value' }],
        },
      ]);
    }
  });

  it("gemini: the launch's settings.json keeps the MCP servers the configuration step wrote there", () => {
    const r = deliverMcp(RUNTIME_SPECS.gemini, servers, vars, secretKeys);
    assert.ok(r.ok);
    const merged = JSON.parse(
      mergeRuntimeFile(r.value.files[0]!.content, '{"privacy": {"usageStatisticsEnabled": false}}'),
    );
    assert.deepEqual(Object.keys(merged.mcpServers), ['files', 'docs']);
    assert.deepEqual(merged.privacy, { usageStatisticsEnabled: false });
    assert.equal(mergeRuntimeFile(undefined, 'x = 1\n'), 'x = 1\n');
  });

  it("opencode: its MCP tools are `ask` too, beside the launch's bash, edit and webfetch", () => {
    const r = deliverMcp(RUNTIME_SPECS.opencode, servers, vars, secretKeys);
    assert.ok(r.ok);
    assert.deepEqual(
      r.value.files.map((f) => f.path),
      ['/home/sprite/.config/opencode/opencode.json'],
    );
    const merged = JSON.parse(
      mergeRuntimeFile(r.value.files[0]!.content, '{"model": "x/y", "permission": {"bash": "ask", "edit": "ask"}}'),
    );
    assert.deepEqual(merged, {
      model: 'x/y',
      permission: { 'files_*': 'ask', 'docs_*': 'ask', bash: 'ask', edit: 'ask' },
    });
  });

  it('a missing ${VAR} is an error naming it and where it is used, for every runtime', () => {
    for (const runtime of ['claude', 'codex', 'gemini', 'opencode', 'demo'] as const) {
      const r = deliverMcp(
        RUNTIME_SPECS[runtime],
        { x: { type: 'sse', url: 'https://a.test/${NOPE}' } },
        vars,
        secretKeys,
      );
      assert.deepEqual(r, { ok: false, missing: 'NOPE', where: 'MCP server x url' });
    }
  });
});

describe('MCP server input', () => {
  it('takes a ${VAR} anywhere in an http url (a port, a whole base), refuses what is no URL with any values', () => {
    for (const url of [
      'http://127.0.0.1:${PORT}/mcp',
      '${MCP_BASE}/mcp',
      'https://${HOST}/mcp',
      'https://mcp.example.test/v1',
    ]) {
      assert.ok(McpServerSchema.safeParse({ type: 'http', url }).success, url);
    }
    for (const url of ['not a url', 'ftp://x.test/${A}', 'http://exa mple.test/${A}', '']) {
      assert.ok(!McpServerSchema.safeParse({ type: 'http', url }).success, url);
    }
  });
});

describe('launch plans', () => {
  const env = {
    id: 'e1',
    accountId: 'a',
    name: 'p',
    description: '',
    packages: { apt: [], npm: ['left-pad'] },
    envVars: { A: '1', SHARED: 'from-var' },
    setupScript: 'make',
    networkingType: 'limited' as const,
    allowedHosts: ['registry.npmjs.org'],
    repositories: [{ url: 'https://git.test/r.git', mount_path: '/home/sprite/r', secret_key: 'TOKEN' }],
    checkpointId: null,
    metadata: {},
    insertedAt: new Date(),
    updatedAt: new Date(),
  };
  it('orders the steps as documented, puts variables before secrets, and lets a secret shadow a variable', () => {
    const p = planLaunch(
      RUNTIME_SPECS.demo,
      { skills: [], mcpServers: {} },
      {
        environment: env,
        secrets: new Private(
          new Map([
            ['TOKEN', 't0k'],
            ['SHARED', 'from-secret'],
          ]),
        ),
      },
    );
    assert.ok(p.ok);
    assert.deepEqual(
      p.value.steps.map((s) => s.name),
      ['skills', 'configuration', 'packages', 'network', 'clone', 'setup'],
    );
    assert.deepEqual(p.value.env, [['A', '1']]);
    assert.deepEqual(p.value.secrets.reveal(), [
      ['TOKEN', 't0k'],
      ['SHARED', 'from-secret'],
    ]);
    assert.equal(p.value.limited, true);
    assert.ok(!JSON.stringify(p.value).includes('t0k'), 'a plan shows no secret when serialised');
  });
  it('a repository naming a secret the environment lacks fails at clone, before any sandbox', () => {
    const p = planLaunch(
      RUNTIME_SPECS.demo,
      { skills: [], mcpServers: {} },
      { environment: env, secrets: new Private(new Map()) },
    );
    assert.deepEqual(p, {
      ok: false,
      step: 'clone',
      reason: 'repository https://git.test/r.git names secret TOKEN, which the environment does not have',
    });
  });
  it('a step hash follows its input only', () => {
    const a = planLaunch(
      RUNTIME_SPECS.demo,
      { skills: [], mcpServers: {} },
      { environment: env, secrets: new Private(new Map([['TOKEN', 'one']])) },
    );
    const b = planLaunch(
      RUNTIME_SPECS.demo,
      { skills: [], mcpServers: {} },
      { environment: { ...env, setupScript: 'make all' }, secrets: new Private(new Map([['TOKEN', 'two']])) },
    );
    assert.ok(a.ok && b.ok);
    const changed = a.value.steps.filter((s, i) => s.hash !== b.value.steps[i]!.hash).map((s) => s.name);
    assert.deepEqual(changed, ['setup'], 'a rotated token does not re-clone');
  });
});

describe('step helpers', () => {
  it('the package commands, every name quoted', () => {
    assert.deepEqual(packageCommands({ apt: ['git', 'libpq-dev'], npm: ['typescript@5', "odd'name"] }), [
      "SUDO=; if [ \"$(id -u)\" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi; $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq 'git' 'libpq-dev'",
      `npm install -g --no-progress --silent 'typescript@5' 'odd'\\''name'`,
    ]);
    assert.deepEqual(packageCommands({ apt: [], npm: [] }), []);
  });
  it('scrubs every secret, longest first', () => {
    const s = scrubber(['abc123', 'abc123456', 'xy']);
    assert.equal(s('token abc123456 and abc123, xy stays'), 'token [secret] and [secret], xy stays');
  });
  it('allowed hosts: exact names and *. wildcards below the apex', () => {
    assert.ok(hostAllowed(['github.com', '*.npmjs.org'], 'GitHub.com'));
    assert.ok(hostAllowed(['*.npmjs.org'], 'registry.npmjs.org'));
    assert.ok(!hostAllowed(['*.npmjs.org'], 'npmjs.org'));
    assert.ok(!hostAllowed([], 'github.com'));
  });
});
