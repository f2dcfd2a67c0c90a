/**
 * Lints the server Dockerfile, docker-compose.yml and every images/<provider>/Dockerfile against
 * the rules (docs/deployment.md). Docker is absent here, so this is what proves them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVER_ENV_VARS } from '../src/server/config.ts';
import { KNOWN_PROVIDERS } from '../src/sandbox/providers.ts';
import { finalUser, keyValues, parseDockerfile, parseFrom, parseHealthcheck, stages, type Instruction } from './lint/dockerfile.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const HOSTED = KNOWN_PROVIDERS.filter((p) => p !== 'runner');
const SANDBOX_PATH = '/home/sprite/.local/bin:/home/sprite/.npm-global/bin:/home/sprite/.bun/bin:';

const env = (ins: readonly Instruction[]) => new Map(ins.filter((i) => i.keyword === 'ENV').flatMap(keyValues));

/** RUN instructions with the user each runs as. */
function runsAs(ins: readonly Instruction[]): Array<{ user: string; cmd: string }> {
  let user = 'root';
  const out: Array<{ user: string; cmd: string }> = [];
  for (const i of ins) {
    if (i.keyword === 'FROM') user = 'root';
    if (i.keyword === 'USER') user = i.args.split(':')[0]!;
    if (i.keyword === 'RUN') out.push({ user, cmd: i.args });
  }
  return out;
}

describe('server image', () => {
  const ins = parseDockerfile(read('Dockerfile'));
  const st = stages(ins);
  const last = st.at(-1)!;

  it('is multi-stage, on pinned base images, copying only from earlier stages', () => {
    assert.ok(st.length >= 2, 'multi-stage');
    const names: string[] = [];
    for (const s of st) {
      const from = parseFrom(s[0]!);
      assert.ok(from.tag && from.tag !== 'latest', `${from.image} has a pinned tag`);
      for (const c of s.filter((i) => i.keyword === 'COPY' && i.flags.from)) assert.ok(names.includes(c.flags.from!), `COPY --from=${c.flags.from} names an earlier stage`);
      if (from.stage) names.push(from.stage);
    }
    assert.ok(last.some((i) => i.keyword === 'COPY' && i.flags.from), 'the runtime stage takes its dependencies from a build stage');
    assert.ok(st[0]!.some((i) => i.keyword === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args)), 'production dependencies only');
  });

  it('runs as a non-root user', () => {
    const user = finalUser(last);
    assert.ok(!['root', '0'].includes(user), `final user is ${user}`);
    assert.ok(last.some((i) => i.keyword === 'RUN' && i.args.includes(`useradd`) && i.args.includes(user)), `${user} is created`);
  });

  it('has a health check against /health/ready on the served port', () => {
    const hcs = last.filter((i) => i.keyword === 'HEALTHCHECK');
    assert.equal(hcs.length, 1);
    const hc = parseHealthcheck(hcs[0]!);
    const cmd = hc.command?.exec?.join(' ') ?? hc.command?.shell ?? '';
    assert.match(cmd, /http:\/\/127\.0\.0\.1:4000\/health\/ready/);
    assert.ok(hc.options.interval && hc.options['start-period'], 'interval and start period');
    assert.ok(last.some((i) => i.keyword === 'EXPOSE' && i.args.split(/\s+/).includes('4000')));
  });

  it('starts `fountain server` on all interfaces with its data in a volume', () => {
    const entry = last.find((i) => i.keyword === 'ENTRYPOINT')?.exec ?? [];
    const cmd = last.find((i) => i.keyword === 'CMD')?.exec ?? [];
    assert.deepEqual(entry, ['node', 'bin/fountain.js']);
    assert.deepEqual(cmd.slice(0, 1), ['server']);
    const flag = (f: string) => cmd[cmd.indexOf(f) + 1];
    assert.equal(flag('--host'), '0.0.0.0');
    assert.equal(flag('--port'), '4000');
    const volume = last.find((i) => i.keyword === 'VOLUME');
    assert.ok(volume?.exec?.includes(flag('--data-dir')!), 'the data directory is a volume');
    for (const dir of ['bin', 'src', 'docs']) assert.ok(last.some((i) => i.keyword === 'COPY' && i.args.startsWith(`${dir} `)), `copies ${dir}/`);
  });
});

describe('docker-compose.yml', () => {
  const text = read('docker-compose.yml');
  /** `key: value` lines of a block, by indentation, under a path of parent keys. */
  function block(path: readonly string[]): Map<string, string> {
    let depth = 0;
    let indent = -1;
    const out = new Map<string, string>();
    for (const line of text.split('\n')) {
      if (/^\s*(#.*)?$/.test(line)) continue;
      const ind = line.length - line.trimStart().length;
      const m = /^\s*([A-Za-z0-9_.-]+):\s*(.*)$/.exec(line);
      if (depth < path.length) {
        if (depth > 0 && ind <= indent) break;
        if (m && m[1] === path[depth] && (depth === 0 ? ind === 0 : ind > indent)) {
          depth++;
          indent = ind;
        }
        continue;
      }
      if (ind <= indent) break;
      if (m) out.set(m[1]!, m[2]!);
    }
    return out;
  }

  it('runs the server on PostgreSQL with persistent volumes', () => {
    assert.equal(block(['services', 'fountain']).get('build'), '.');
    assert.match(block(['services', 'postgres']).get('image') ?? '', /^postgres:\d+/);
    assert.equal(block(['services', 'fountain', 'depends_on', 'postgres']).get('condition'), 'service_healthy');
    assert.match(text, /- postgres-data:\/var\/lib\/postgresql\/data/);
    assert.match(text, /- fountain-data:\/var\/lib\/fountain/);
    assert.deepEqual([...block(['volumes']).keys()].sort(), ['fountain-data', 'postgres-data']);
    assert.match(block(['services', 'fountain', 'environment']).get('FOUNTAIN_DATABASE_URL') ?? '', /@postgres:5432\//);
  });

  it('passes exactly the server\'s variables through', () => {
    const vars = block(['services', 'fountain', 'environment']);
    assert.deepEqual([...vars.keys()].sort(), [...SERVER_ENV_VARS].sort());
    for (const [k, v] of vars) assert.ok(v.startsWith(`\${${k}:-`), `${k} is taken from .env, blank when unset`);
  });
});

describe('sandbox images', () => {
  const parsed = HOSTED.map((p) => ({ p, ins: parseDockerfile(read(`images/${p}/Dockerfile`)) }));

  it('exist for every hosted provider', () => {
    for (const p of HOSTED) assert.ok(existsSync(join(ROOT, 'images', p, 'Dockerfile')), p);
  });

  for (const { p, ins } of parsed) {
    describe(p, () => {
      it('builds on ubuntu:24.04 with node 22, bash, git, curl and sudo', () => {
        const st = stages(ins);
        assert.equal(st.length, 1);
        assert.deepEqual(parseFrom(st[0]![0]!), { image: 'ubuntu', tag: '24.04', digest: null, stage: null });
        const args = new Map(ins.filter((i) => i.keyword === 'ARG').flatMap(keyValues));
        assert.equal(args.get('NODE_MAJOR'), '22');
        const root = runsAs(ins).filter((r) => r.user === 'root').map((r) => r.cmd).join(' ');
        for (const pkg of ['bash', 'git', 'curl', 'sudo', 'nodejs']) assert.match(root, new RegExp(`apt-get install[^&]*\\b${pkg}\\b`), pkg);
        assert.match(root, /setup_\$\{NODE_MAJOR\}\.x/);
      });

      it('has the sprite user with passwordless sudo and /home/sprite', () => {
        const root = runsAs(ins).filter((r) => r.user === 'root').map((r) => r.cmd).join(' ');
        assert.match(root, /useradd\b[^&]*--home-dir \/home\/sprite\b[^&]*\bsprite\b/);
        assert.match(root, /sprite ALL=\(ALL\) NOPASSWD:ALL/);
        const e = env(ins);
        assert.equal(e.get('HOME'), '/home/sprite');
        assert.ok(e.get('PATH')?.startsWith(SANDBOX_PATH), `PATH starts with ${SANDBOX_PATH}`);
        assert.equal(e.get('NPM_CONFIG_PREFIX'), '/home/sprite/.npm-global');
      });

      it('gives sprite a writable npm prefix and installs bun, the agent CLIs and the ACP adapters as sprite', () => {
        const sprite = runsAs(ins).filter((r) => r.user === 'sprite').map((r) => r.cmd).join(' && ');
        assert.match(sprite, /npm config set prefix \/home\/sprite\/\.npm-global/);
        assert.match(sprite, /bun\.sh\/install/);
        for (const pkg of ['@anthropic-ai/claude-code', '@openai/codex', '@google/gemini-cli']) assert.ok(sprite.includes(pkg), pkg);
        assert.match(sprite, /@agentclientprotocol\/claude-agent-acp@\$\{CLAUDE_AGENT_ACP_VERSION\}/);
        assert.match(sprite, /@agentclientprotocol\/codex-acp@\$\{CODEX_ACP_VERSION\}/);
        assert.match(sprite, /bun install -g opencode-ai/);
        const args = new Map(ins.filter((i) => i.keyword === 'ARG').flatMap(keyValues));
        assert.equal(args.get('CLAUDE_AGENT_ACP_VERSION'), '0.66.0');
        assert.equal(args.get('CODEX_ACP_VERSION'), '1.1.14');
      });

      it('runs commands as sprite, or names sprite as the exec user where the provider picks it', () => {
        const user = finalUser(ins);
        if (p === 'e2b') assert.ok(user === 'sprite' || read('.env.compose.example').includes('E2B_USER=sprite'), 'E2B_USER=sprite');
        else assert.equal(user, 'sprite');
      });
    });
  }

  it('share one common part, identical up to the provider-specific tail', () => {
    const common = (ins: readonly Instruction[]) => {
      const end = ins.findIndex((i) => i.keyword === 'RUN' && i.args.includes('npm config set prefix'));
      assert.ok(end > 0);
      return ins.slice(0, end + 1).map((i) => [i.keyword, i.flags, i.args]);
    };
    const [first, ...rest] = parsed;
    for (const other of rest) assert.deepEqual(common(other.ins), common(first!.ins), `${other.p} differs from ${first!.p}`);
  });
});
