/**
 * Lints the server Dockerfile, docker-compose.yml and every images/<provider>/Dockerfile against
 * the rules (docs/deployment.md). Docker is absent here, so this is what proves them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { SERVER_ENV_VARS } from '../src/server/config.ts';
import { KNOWN_PROVIDERS } from '../src/sandbox/providers.ts';
import {
  finalUser,
  globalArgs,
  keyValues,
  parseDockerfile,
  parseFrom,
  parseHealthcheck,
  stages,
  type Instruction,
} from './lint/dockerfile.ts';

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

/** Every FROM that is not an earlier stage names BASE_IMAGE, whose default is the public `image`. */
function assertBaseImageArg(ins: readonly Instruction[], image: string): void {
  const args = globalArgs(ins);
  assert.equal(args.get('BASE_IMAGE'), image, `ARG BASE_IMAGE=${image} before the first FROM`);
  const names: string[] = [];
  for (const s of stages(ins)) {
    const raw = s[0]!.args.split(/\s+/)[0]!;
    if (!names.includes(raw)) assert.equal(raw, '${BASE_IMAGE}', `line ${s[0]!.line}: FROM \${BASE_IMAGE}`);
    const stage = parseFrom(s[0]!, args).stage;
    if (stage) names.push(stage);
  }
}

describe('server image', () => {
  const ins = parseDockerfile(read('Dockerfile'));
  const args = globalArgs(ins);
  const st = stages(ins);
  const last = st.at(-1)!;

  it('builds on BASE_IMAGE, the public node:20-bookworm-slim unless CI passes its local one', () => {
    assertBaseImageArg(ins, 'node:20-bookworm-slim');
  });

  it('is multi-stage, on pinned base images, copying only from earlier stages', () => {
    assert.ok(st.length >= 2, 'multi-stage');
    const names: string[] = [];
    for (const s of st) {
      const from = parseFrom(s[0]!, args);
      assert.ok(from.tag && from.tag !== 'latest', `${from.image} has a pinned tag`);
      for (const c of s.filter((i) => i.keyword === 'COPY' && i.flags.from))
        assert.ok(names.includes(c.flags.from!), `COPY --from=${c.flags.from} names an earlier stage`);
      if (from.stage) names.push(from.stage);
    }
    assert.ok(
      last.some((i) => i.keyword === 'COPY' && i.flags.from),
      'the runtime stage takes its dependencies from a build stage',
    );
    assert.ok(
      st[0]!.some((i) => i.keyword === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args)),
      'production dependencies only',
    );
  });

  it('runs as a non-root user', () => {
    const user = finalUser(last);
    assert.ok(!['root', '0'].includes(user), `final user is ${user}`);
    assert.ok(
      last.some((i) => i.keyword === 'RUN' && i.args.includes(`useradd`) && i.args.includes(user)),
      `${user} is created`,
    );
  });

  it('has a health check against /health/ready on the served port', () => {
    const hcs = last.filter((i) => i.keyword === 'HEALTHCHECK');
    assert.equal(hcs.length, 1);
    const hc = parseHealthcheck(hcs[0]!);
    const cmd = hc.command?.exec?.join(' ') ?? hc.command?.shell ?? '';
    assert.match(cmd, /fetch\(process\.env\.FOUNTAIN_HEALTH_URL\)/);
    assert.equal(env(last).get('FOUNTAIN_HEALTH_URL'), 'http://127.0.0.1:4000/health/ready');
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
    for (const dir of ['bin', 'src', 'docs'])
      assert.ok(
        last.some((i) => i.keyword === 'COPY' && i.args.startsWith(`${dir} `)),
        `copies ${dir}/`,
      );
  });
});

describe('runner image', () => {
  const ins = parseDockerfile(read('Dockerfile.runner'));
  const st = stages(ins);
  const last = st.at(-1)!;
  const entry = last.find((i) => i.keyword === 'ENTRYPOINT')?.exec ?? [];
  const flag = (f: string) => (entry.includes(f) ? entry[entry.indexOf(f) + 1] : undefined);

  it("builds on BASE_IMAGE with the server image's dependency and build stages, so they share the build cache", () => {
    assertBaseImageArg(ins, 'node:20-bookworm-slim');
    const server = stages(parseDockerfile(read('Dockerfile')));
    const shape = (stage: readonly Instruction[]) => stage.map((i) => [i.keyword, i.flags, i.args]);
    assert.deepEqual(st.slice(0, 2).map(shape), server.slice(0, 2).map(shape));
  });

  it('runs `fountain runner` with the process backend, as a non-root user, with its state in a volume', () => {
    assert.deepEqual(entry.slice(0, 3), ['node', 'bin/fountain.js', 'runner']);
    assert.equal(flag('--backend'), 'process');
    const user = finalUser(last);
    assert.ok(!['root', '0'].includes(user), `final user is ${user}`);
    assert.ok(last.some((i) => i.keyword === 'RUN' && i.args.includes('useradd') && i.args.includes(user)));
    const volume = last.find((i) => i.keyword === 'VOLUME')?.exec ?? [];
    assert.equal(volume.length, 1);
    for (const path of [flag('--root'), flag('--status-file'), env(last).get('FOUNTAIN_HOME')])
      assert.ok(path?.startsWith(`${volume[0]}/`) || path === volume[0], `${path} is in the volume ${volume[0]}`);
  });

  it("has a health check that reads the daemon's status file with the tested statusHealthy", async () => {
    const hcs = last.filter((i) => i.keyword === 'HEALTHCHECK');
    assert.equal(hcs.length, 1);
    const hc = parseHealthcheck(hcs[0]!);
    const script = hc.command?.exec?.at(-1) ?? '';
    assert.ok(script.includes(`readFileSync('${flag('--status-file')}'`), 'reads the file the daemon writes');
    const imported = /from '\/app\/dist\/(runner\/status-file)\.js'/.exec(script)?.[1];
    assert.equal(imported, 'runner/status-file');
    const mod = (await import(`../src/${imported}.ts`)) as Record<string, unknown>;
    assert.equal(typeof mod.statusHealthy, 'function');
    assert.ok(hc.options.interval && hc.options['start-period'] && hc.options.retries);
  });
});

describe('docker-compose.yml', () => {
  // Merge keys (`<<: *fountain`) resolved, as Compose resolves them.
  const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as {
    services: Record<
      string,
      Record<string, unknown> & {
        environment?: Record<string, string>;
        volumes?: string[];
        ports?: string[];
        profiles?: string[];
      }
    >;
    volumes: Record<string, unknown>;
  };
  const services = compose.services;

  it('runs the server on PostgreSQL with persistent volumes', () => {
    const fountain = services.fountain!;
    assert.equal(fountain.build, '.');
    assert.match(String(services.postgres!.image), /^postgres:\d+/);
    assert.deepEqual(fountain.depends_on, { postgres: { condition: 'service_healthy' } });
    assert.ok(services.postgres!.volumes!.includes('postgres-data:/var/lib/postgresql/data'));
    assert.ok(fountain.volumes!.includes('fountain-data:/var/lib/fountain'));
    assert.deepEqual(Object.keys(compose.volumes).sort(), ['fountain-2-data', 'fountain-data', 'postgres-data']);
    assert.match(fountain.environment!.FOUNTAIN_DATABASE_URL ?? '', /@postgres:5432\//);
  });

  it("passes exactly the server's variables through", () => {
    const vars = services.fountain!.environment!;
    assert.deepEqual(Object.keys(vars).sort(), [...SERVER_ENV_VARS].sort());
    for (const [k, v] of Object.entries(vars))
      assert.ok(v.startsWith(`\${${k}:-`), `${k} is taken from .env, blank when unset`);
  });

  it('has a cluster profile: a second node like the first, behind a load balancer set up for SSE', () => {
    const [one, two, lb] = [services.fountain!, services['fountain-2']!, services.lb!];
    assert.deepEqual(one.profiles, undefined, 'the first node runs without a profile');
    assert.deepEqual(two.profiles, ['cluster']);
    assert.deepEqual(lb.profiles, ['cluster']);
    assert.deepEqual(two.environment, one.environment, 'both nodes get the same configuration');
    assert.deepEqual([two.image, two.depends_on], [one.image, one.depends_on]);
    assert.deepEqual(two.volumes, ['fountain-2-data:/var/lib/fountain'], 'each node has its own data directory');
    assert.equal(two.ports, undefined, 'the second node is reached through the load balancer');
    assert.match(String(lb.image), /^caddy:2(\.\d+)*$/);
    assert.deepEqual(lb.ports, ['8080:8080']);
    assert.ok(lb.volumes!.includes('./deploy/Caddyfile:/etc/caddy/Caddyfile:ro'));
    const caddy = read('deploy/Caddyfile');
    // The nodes come from FOUNTAIN_NODES, compose's two by default (the Caddy cluster test sets its own).
    assert.match(caddy, /reverse_proxy \{\$FOUNTAIN_NODES:fountain:4000 fountain-2:4000\} \{/);
    assert.match(caddy, /^\s*flush_interval -1$/m, 'events are not buffered');
    assert.match(caddy, /^\s*health_uri \/health\/ready$/m);
    assert.doesNotMatch(caddy, /^\s*(read_timeout|write_timeout)\b/m, 'no timeout cuts a long stream');
    assert.match(read('docs/deployment.md'), /docker compose --profile cluster up/);
  });
});

describe('sandbox images', () => {
  const parsed = HOSTED.map((p) => ({ p, ins: parseDockerfile(read(`images/${p}/Dockerfile`)) }));

  it('exist for every hosted provider', () => {
    for (const p of HOSTED) assert.ok(existsSync(join(ROOT, 'images', p, 'Dockerfile')), p);
  });

  for (const { p, ins } of parsed) {
    describe(p, () => {
      it('builds on BASE_IMAGE (the public node:22-bookworm-slim) with bash, git, curl and sudo from Debian', () => {
        const st = stages(ins);
        assert.equal(st.length, 1);
        assertBaseImageArg(ins, 'node:22-bookworm-slim');
        const root = runsAs(ins)
          .filter((r) => r.user === 'root')
          .map((r) => r.cmd)
          .join(' ');
        for (const pkg of ['bash', 'git', 'curl', 'sudo'])
          assert.match(root, new RegExp(`apt-get install[^&]*\\b${pkg}\\b`), pkg);
        assert.doesNotMatch(root, /nodesource|\| *bash/, 'no script piped from the network into a shell');
      });

      it('has the sprite user with passwordless sudo and /home/sprite', () => {
        const root = runsAs(ins)
          .filter((r) => r.user === 'root')
          .map((r) => r.cmd)
          .join(' ');
        assert.match(root, /useradd\b[^&]*--home-dir \/home\/sprite\b[^&]*\bsprite\b/);
        assert.match(root, /sprite ALL=\(ALL\) NOPASSWD:ALL/);
        const e = env(ins);
        assert.equal(e.get('HOME'), '/home/sprite');
        assert.ok(e.get('PATH')?.startsWith(SANDBOX_PATH), `PATH starts with ${SANDBOX_PATH}`);
        assert.equal(e.get('NPM_CONFIG_PREFIX'), '/home/sprite/.npm-global');
      });

      it('gives sprite a writable npm prefix and installs bun, the agent CLIs and the ACP adapters as sprite', () => {
        const sprite = runsAs(ins)
          .filter((r) => r.user === 'sprite')
          .map((r) => r.cmd)
          .join(' && ');
        assert.match(sprite, /npm config set prefix \/home\/sprite\/\.npm-global/);
        const npmGlobal = /npm install -g ([^&]*)/.exec(sprite)?.[1] ?? '';
        for (const pkg of ['bun', 'opencode-ai', '@anthropic-ai/claude-code', '@openai/codex', '@google/gemini-cli'])
          assert.ok(npmGlobal.split(/\s+/).includes(pkg), `npm install -g ${pkg}`);
        assert.match(sprite, /@agentclientprotocol\/claude-agent-acp@\$\{CLAUDE_AGENT_ACP_VERSION\}/);
        assert.match(sprite, /@agentclientprotocol\/codex-acp@\$\{CODEX_ACP_VERSION\}/);
        const args = new Map(ins.filter((i) => i.keyword === 'ARG').flatMap(keyValues));
        assert.equal(args.get('CLAUDE_AGENT_ACP_VERSION'), '0.66.0');
        assert.equal(args.get('CODEX_ACP_VERSION'), '1.1.14');
      });

      it('runs commands as sprite, or names sprite as the exec user where the provider picks it', () => {
        const user = finalUser(ins);
        if (p === 'e2b')
          assert.ok(user === 'sprite' || read('.env.compose.example').includes('E2B_USER=sprite'), 'E2B_USER=sprite');
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
    for (const other of rest)
      assert.deepEqual(common(other.ins), common(first!.ins), `${other.p} differs from ${first!.p}`);
  });
});
