/**
 * One real conversation with a real coding agent, as a user would have it: the adapter installed from
 * the npm registry into a runner sandbox by provisioning, its credential and base_url set through
 * the public API, a local model API speaking the vendor's wire format. Each runtime's test calls
 * `realAgentConversation` once and asserts on what it returns and on what the run left behind.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pino from 'pino';
import { acceptRunnerSocket } from '../../src/providers/runner/index.ts';
import { STATE_DIR } from '../../src/runner/backends/namespace/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../../src/server/start.ts';
import { answer, call, openStream, type Json, type SseEvent, type Stream } from '../helpers/http.ts';
import type { ModelApiServer } from '../model-apis/server.ts';
import { agentProcessesOf, type AgentProc } from '../helpers/processes.ts';
import { startNamespaceHost, type NamespaceHost } from './namespace-host.ts';
import { FINAL_PREFIX, MCP_PREFIX, RECALL_PREFIX } from '../model-apis/script.ts';
import { EventReader } from '../../src/server/web/event-view.tsx';
import { sandboxHomes } from '../../src/server/web/home-paths.ts';
import { fileChanges, type FileChange } from '../../src/server/web/pages/files-panel.tsx';
import type { ToolView } from '../../src/acp/tool-view.ts';
import { PNG_48x32 } from '../fixtures/images.ts';
import {
  HTTP_TOOL,
  readStdioLog,
  startHttpProbe,
  STDIO_FIXTURE,
  STDIO_TOOL,
  type HttpProbe,
  type McpSeen,
} from './mcp-probe.ts';

const execFileAsync = promisify(execFile);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** The persistent npm cache `.ci/run` pre-warms: sandbox installs read the adapters from it. */
export const NPM_CACHE = join(REPO, '.cache', 'npm');
/** Where process-backend sandboxes share one install of each adapter version, across the suite's files. */
export const RUNTIME_STORE = join(REPO, '.cache', 'runtimes');
/** A process-backend runner's flags for the warm npm cache and the shared runtime store. */
export const AGENT_CACHE_ARGS: readonly string[] = ['--npm-cache', NPM_CACHE, '--runtime-store', RUNTIME_STORE];

export interface RealAgentCase {
  readonly runtime: 'claude' | 'codex' | 'gemini' | 'opencode';
  readonly model: string;
  /** The account credential this runtime reads for the model. */
  readonly credential: 'anthropic_api_key' | 'claude_code_oauth_token' | 'openai_api_key' | 'gemini_api_key';
  /** A key in the vendor's shape; a random tail is added. */
  readonly keyPrefix: string;
  startApi(key: string): Promise<ModelApiServer>;
  /** The base_url a user would give for this API (the form the runtime's SDK takes). */
  baseUrl(api: ModelApiServer): string;
  /** The model id the model API must be asked for. */
  readonly modelAsked: string;
  /** Where the agent's shell runs, on the host, given the sandbox directory. */
  workdir(sandboxDir: string): string;
  /** Called before a wake (gemini loses a session loaded within the minute it was created). */
  beforeWake?(): Promise<void>;
  /** Settings files of the runtime, relative to HOME (compared between two conversations at once). */
  readonly settingsFiles: readonly string[];
  /** Host paths of the files docs/environments.md names for this runtime's skill and MCP delivery, read after provisioning. */
  deliveredFiles(sandboxDir: string): string[];
  /** True: a turn asks the runtime's file-writing tool to write a file (`WRITE:`), read back as the files panel reads it. */
  readonly writesFile?: boolean;
  /** Sends one image in a turn (the runtime advertises image prompts); the run keeps that turn. */
  readonly sendsImage?: boolean;
}

/** The `WRITE:` turn: the file's name, the turn, and the files changed as the conversation page's files panel reads them. */
export interface EditRun {
  readonly file: string;
  readonly turn: Json;
  readonly files: FileChange[];
}

/** Which backend the runner's sandboxes use: a directory, or bubblewrap with its own uid, /tmp and network. */
export type RealAgentBackend = 'process' | 'namespace';

/**
 * `full`: everything below. `confined`: what a confining backend changes — one conversation, its first
 * turn, the skill and MCP servers (reached through the sandbox's egress policy), a park and a wake, the
 * secrets and the shared /tmp searched; not the second conversation, the edit and image turns, the key
 * rotation, the second park or the refused key, which the process backend's run of the runtime covers.
 */
export type RealAgentScope = 'full' | 'confined';

export interface RealAgentOptions {
  readonly backend?: RealAgentBackend;
  readonly scope?: RealAgentScope;
}

export interface RealAgentRun {
  readonly backend: RealAgentBackend;
  readonly scope: RealAgentScope;
  readonly key: string;
  readonly api: ModelApiServer;
  readonly sandboxDir: string;
  readonly token: string;
  readonly refusedBeforeCredential: Json;
  readonly validation: { wrong: Json; right: Json; list: Json };
  readonly firstTurn: Json;
  readonly firstAnswer: string;
  /** The `WRITE:` turn, for a case that `writesFile`; null otherwise. */
  readonly edit: EditRun | null;
  /** The turn that sent PNG_48x32, for a case that `sendsImage`; null otherwise. */
  readonly imageTurn: Json | null;
  readonly permission: Json;
  readonly proofFile: string | null;
  readonly recallTurn: Json;
  readonly recallAnswer: string;
  readonly resets: SseEvent[];
  /** The second park and wake: the turn asking to recall, its answer, and the session resets over the whole run. */
  readonly secondRecallTurn: Json;
  /** Session resets over the whole run (`resets`: those of the first wake). */
  readonly allResets: SseEvent[];
  readonly secondRecallAnswer: string;
  /** The turn after the credential was replaced (no park in between) and the model API's calls during it. */
  readonly rotatedTurn: Json;
  readonly rotatedCalls: ReadonlyArray<{ readonly authorized: boolean }>;
  /** The rotated key (the one the model API accepted after the rotation); null in the confined scope. */
  readonly rotatedKey: string | null;
  /** Where the real key was found: process environments on this machine, `ps eww`, the sandbox's files. */
  readonly keyHolders: string[];
  /** The gateway's usage of the account (both conversations) and its audit rows, read before the rotation. */
  readonly usage: Json[];
  readonly usageByTurn: Json[];
  readonly gatewayCalls: Json[];
  /** What the model API had been asked when the usage was read. */
  readonly askedAtUsage: ReadonlyArray<{ readonly authorized: boolean; readonly path: string }>;
  /** Every event of the conversation as stored (the API's event pages). */
  readonly events: Json[];
  /** The agent processes of the conversation seen during turn 1: cwd and HOME as the kernel reports them. */
  readonly agentProcesses: AgentProc[];
  /**
   * Files of either sandbox (its directory and, on the namespace backend, its private /tmp) holding the
   * key, the rotated key, the environment's secret or a credential the agent process held (its sandbox
   * token, the key variable it was given), each searched while the sandbox still existed.
   */
  readonly keyInFiles: string[];
  /** How many distinct credentials the agent processes held (searched for in the files). */
  readonly heldCredentials: number;
  /** Files in the machine's shared temporary directory written during the run that carry a mark of it. */
  readonly sharedTmpWrites: string[];
  /** The sandbox directory still exists after terminate. */
  readonly leftAfterTerminate: boolean;
  /** The second conversation of the same agent on the same runner, run at the same time as the first (full scope). */
  readonly other: OtherRun | null;
  readonly wrongKeyTurn: Json;
  /** What the agent said in the wrong-key turn (ACP lines), for the failure message. */
  readonly wrongKeyAcp: string[];
  readonly streamEvents: SseEvent[];
  /** Everything the run wrote where a secret must not be: logs, events, errors, `ps`, `.env`. */
  readonly exposures: Record<string, string>;
  /** The agent's skill and MCP servers: what reached the runtime and what came back. */
  readonly tools: ToolsRun;
}

export interface OtherRun {
  readonly sandboxDir: string;
  readonly token: string;
  readonly firstTurn: Json;
  readonly recallTurn: Json;
  readonly recallAnswer: string;
  readonly agentProcesses: AgentProc[];
  /** The runtime's settings files of each conversation (relative path → [first's, other's] content or null). */
  readonly settings: Record<string, [string | null, string | null]>;
  readonly leftAfterTerminate: boolean;
}

export interface ToolsRun {
  /** The environment's secret the HTTP MCP server's `Authorization` header names as `${PROBE_HTTP_TOKEN}`. */
  readonly mcpToken: string;
  readonly word: string;
  readonly skillMark: string;
  readonly turn: Json;
  readonly answer: string;
  /** Permission requests the MCP turn raised (each answered allow_once through the API). */
  readonly permissions: Json[];
  /** What the stdio server received (JSON-RPC methods, its tool's calls). */
  readonly stdio: Array<Record<string, unknown>>;
  /** What the HTTP server received. */
  readonly http: McpSeen[];
  /** What the runtime put where the model reads it: the agent's files and process env as delivered. */
  readonly delivered: Record<string, string>;
}

/** The inline skill every real agent gets: its description carries a mark the model API must be shown. */
function probeSkill(mark: string): { name: string; content: string } {
  return {
    name: 'fountain-probe',
    content: `---\nname: fountain-probe\ndescription: Explains the probe phrase ${mark} when a user asks about it.\n---\n\n# Fountain probe\n\nWhen asked about the probe phrase, answer with ${mark}.\n`,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LONG = 300_000;

async function stageAfter(
  s: Stream,
  stage: string,
  state: string,
  afterId: number,
  timeoutMs = LONG,
): Promise<SseEvent> {
  return until(
    () => s.events.find((e) => (e.id ?? 0) > afterId && e.data?.stage === stage && e.data?.state === state),
    `${stage}/${state} on the stream`,
    timeoutMs,
  );
}

/**
 * Every process environment on this machine (`ps eww`, each process environ file) and every sandbox file
 * holding `secret`. The programs run asynchronously: the server runs in this process and must keep serving.
 */
async function secretHolders(secret: string, sandboxDir: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`).includes(secret)) found.push(`/proc/${pid}/environ`);
    } catch {
      // The process ended while the scan ran.
    }
  }
  try {
    const ps = await execFileAsync('ps', ['eww', '-e', '-o', 'pid,args'], { maxBuffer: 64 * 1024 * 1024 });
    if (ps.stdout.includes(secret)) found.push('ps eww');
  } catch (e) {
    found.push(`ps failed: ${String(e)}`);
  }
  found.push(...(await filesHolding(sandboxDir, [secret])));
  return found;
}

/** Asynchronous like every program the harness runs: another case's server may share this process. */
async function processListing(): Promise<string> {
  try {
    return (await execFileAsync('ps', ['-eo', 'pid,args', '--no-headers'], { maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (e) {
    return `ps failed: ${String(e)}`;
  }
}

/**
 * Files under `dir` holding any of `needles` (grep, fixed strings; the sandbox holds the installed agents
 * and, on the namespace backend, its npm cache): run asynchronously, the in-process server keeps serving.
 */
export async function filesHolding(dir: string, needles: readonly string[]): Promise<string[]> {
  if (!existsSync(dir)) return [];
  // grep exits 1 when no file holds any.
  const r = await execFileAsync('grep', ['-rlF', ...needles.flatMap((n) => ['-e', n]), dir], {
    maxBuffer: 64 * 1024 * 1024,
  }).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  return r.stdout.split('\n').filter((l) => l !== '');
}

/**
 * Files in the shared temporary directories changed since `marker` that carry one of the run's marks,
 * outside `own`. Asynchronous: in a full suite /tmp holds every other test's files, and a synchronous
 * walk stalled the server of a case running beside this one (its runner dropped, its sockets reset).
 */
async function sharedTmpWritesSince(marker: string, own: string, marks: readonly string[]): Promise<string[]> {
  const hits = new Set<string>();
  // find exits non-zero when a file vanishes under it (other tests clean up meanwhile); what it printed counts.
  const output = (e: { stdout?: string }) => ({ stdout: e.stdout ?? '' });
  for (const shared of new Set([`/${'tmp'}`, realpathSync(tmpdir())])) {
    const r = await execFileAsync(
      'find',
      [shared, '-xdev', '-path', own, '-prune', '-o', '-type', 'f', '-newer', marker, '-print'],
      { maxBuffer: 64 * 1024 * 1024 },
    ).catch(output);
    const files = r.stdout.split('\n').filter((f) => f !== '' && !f.startsWith(`${own}/`));
    for (let i = 0; i < files.length; i += 200) {
      // grep exits 1 when no file holds a mark, 2 when a file went away: its output is what counts.
      const g = await execFileAsync(
        'grep',
        ['-lF', ...marks.flatMap((m) => ['-e', m]), '--', ...files.slice(i, i + 200)],
        {
          maxBuffer: 16 * 1024 * 1024,
        },
      ).catch(output);
      for (const f of g.stdout.split('\n')) if (f !== '') hits.add(f);
    }
  }
  return [...hits];
}

/** One prompt to its end: each permission request is allowed once through the API. */
async function promptToEnd(
  http: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: Json }>,
  s: Stream,
  convId: string,
  prompt: string,
  onAsk?: () => void | Promise<void>,
  images?: ReadonlyArray<{ data: string; media_type: string }>,
): Promise<{ turnId: string; end: SseEvent; permissions: Json[] }> {
  const from = s.events.reduce((m, e) => Math.max(m, e.id ?? 0), 0);
  const p = await http('POST', `/api/conversations/${convId}/prompts`, { prompt, ...(images ? { images } : {}) });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  const turnId: string = p.body.turn_id;
  const permissions: Json[] = [];
  let after = from;
  for (;;) {
    const e = await until(
      () =>
        s.events.find(
          (x) =>
            (x.id ?? 0) > after &&
            ((x.data?.stage === 'permission' && x.data?.state === 'started') ||
              (x.data?.stage === 'turn' && ['done', 'failed'].includes(x.data?.state) && x.data?.turn_id === turnId)),
        ),
      `a permission request or the end of the turn "${prompt}"`,
      LONG,
    );
    after = e.id ?? after;
    if (e.data.stage === 'turn') return { turnId, end: e, permissions };
    await onAsk?.();
    const req = typeof e.data.data === 'string' ? JSON.parse(e.data.data) : e.data.data;
    permissions.push(req);
    const allow =
      (req.options as Json[]).find((o) => o.kind === 'allow_once') ??
      (req.options as Json[]).find((o) => String(o.kind).startsWith('allow'));
    const yes = await http('POST', `/api/conversations/${convId}/requests/${req.request_id}`, {
      option_id: allow.option_id,
    });
    assert.equal(yes.status, 200, JSON.stringify(yes.body));
  }
}

export async function realAgentConversation(c: RealAgentCase, o: RealAgentOptions = {}): Promise<RealAgentRun> {
  const backend = o.backend ?? 'process';
  const scope = o.scope ?? 'full';
  const full = scope === 'full';
  const key = `${c.keyPrefix}${randomBytes(20).toString('hex')}`;
  const api = await c.startApi(key);
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), `fountain-real-${c.runtime}-`)));
  const logFile = join(tmp, 'server.log');
  mkdirSync(NPM_CACHE, { recursive: true });
  const mcpToken = `mcp-secret-${randomBytes(12).toString('hex')}`;
  // A namespace sandbox reaches no loopback service but the Fountain server: the HTTP probe gets an
  // address and a name of its own.
  const nsHost: NamespaceHost | null = backend === 'namespace' ? await startNamespaceHost(tmp, c.runtime) : null;
  const probe: HttpProbe = await startHttpProbe(
    mcpToken,
    nsHost ? { host: nsHost.probeAddress, port: 80 } : undefined,
  ).catch((e) => {
    nsHost?.close();
    throw e;
  });
  const probeHost = nsHost ? nsHost.probeName : `127.0.0.1:${probe.port}`;
  // A namespace sandbox writes nothing outside its directory and its private /tmp: the log is each
  // conversation's own, in its sandbox (read from conversation A's).
  const stdioLogInside = nsHost ? '/home/sprite/mcp-stdio.jsonl' : join(tmp, 'mcp-stdio.jsonl');
  const stdioLogOf = (sandbox: string) => (nsHost ? join(sandbox, 'mcp-stdio.jsonl') : stdioLogInside);
  const skillMark = `fountain-skill-${randomBytes(6).toString('hex')}`;
  const systemMark = `fountain-system-${randomBytes(6).toString('hex')}`;
  // Files of the shared temporary directory newer than this one were written during the run.
  const startMarker = join(tmp, 'started');
  writeFileSync(startMarker, '');
  let srv: RunningServer | null = null;
  let runner: RunnerChild | null = null;
  const ps: string[] = [];
  const keyHolders: string[] = [];
  const t0 = Date.now();
  const phase = (what: string) => console.error(`[${c.runtime} ${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
  if (process.env.FOUNTAIN_KEEP_REAL_AGENT_TMP) phase(`working in ${tmp} on the ${backend} backend`);
  try {
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      logger: pino({ level: 'debug' }, pino.destination({ dest: logFile, sync: true })),
      engine: {
        idleTimeoutMs: 4000,
        sweepIntervalMs: 500,
        askTimeoutMs: 240_000,
        acpCallTimeoutMs: 120_000,
        turnSilenceTimeoutMs: 180_000,
      },
      sseHeartbeatMs: 1000,
    });
    const bootKey = srv.bootstrapKey!;
    const base = srv.url;
    const http = (method: string, path: string, body?: unknown) => call(base, bootKey, method, path, body);
    const root = join(tmp, 'sandboxes');
    runner = startRunnerChild({
      name: 'real',
      root,
      baseUrl: base,
      apiKey: bootKey,
      home: tmp,
      logLevel: 'debug',
      extraArgs: [
        ...(nsHost
          ? ['--npm-cache', NPM_CACHE, '--backend', 'namespace', '--ns-subnet', nsHost.subnet]
          : AGENT_CACHE_ARGS),
      ],
      ...(nsHost ? { wrap: nsHost.wrap } : {}),
    });
    await until(
      async () => ((await http('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );

    // The environment holds what the MCP servers' `${VAR}`s name: a variable for the port and the log, a secret for the token.
    const env = await http('POST', '/api/environments', {
      name: `real-${c.runtime}-tools`,
      env_vars: { PROBE_HTTP_HOST: probeHost, PROBE_STDIO_LOG: stdioLogInside },
      secrets: { PROBE_HTTP_TOKEN: mcpToken },
      // On the namespace backend the sandbox reaches only the names its policy allows (and the server).
      ...(nsHost ? { networking_type: 'limited', networking_config: { allowed_hosts: [nsHost.probeName] } } : {}),
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await http('POST', '/api/agents', {
      name: `real-${c.runtime}`,
      runtime: c.runtime,
      model: c.model,
      system: `You are a test agent (${systemMark}).`,
      permission_policy: { default: 'ask' },
      environment_id: env.body.data.id,
      skills: [probeSkill(skillMark)],
      // Hyphens, not underscores: gemini splits `mcp_<server>_<tool>` at the first underscore.
      mcp_servers: {
        'probe-stdio': { command: 'node', args: [STDIO_FIXTURE, '${PROBE_STDIO_LOG}'] },
        'probe-http': {
          type: 'http',
          url: 'http://${PROBE_HTTP_HOST}/mcp',
          headers: { Authorization: 'Bearer ${PROBE_HTTP_TOKEN}' },
        },
      },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const agentId: string = agent.body.data.id;

    // No credential yet: refused before any sandbox exists.
    const refused = await http('POST', '/api/conversations', { agent_id: agentId });
    const refusedBeforeCredential = {
      status: refused.status,
      body: refused.body,
      sandboxes: existsSync(root) ? readdirSync(root).filter((n) => !n.startsWith('.')) : [],
    };

    const wrong = await http('PUT', `/api/account/inference-credentials/${c.credential}`, {
      value: `${c.keyPrefix}wrong${randomBytes(8).toString('hex')}`,
      base_url: c.baseUrl(api),
    });
    const right = await http('PUT', `/api/account/inference-credentials/${c.credential}`, {
      value: key,
      base_url: c.baseUrl(api),
      validate: true,
    });
    assert.equal(right.status, 200, JSON.stringify(right.body));
    const list = await http('GET', '/api/account/inference-credentials');

    const created = await http('POST', '/api/conversations', { agent_id: agentId });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    // A second conversation of the same agent on the same runner, at the same time: its own sandbox, settings and history.
    const createdB = full ? await http('POST', '/api/conversations', { agent_id: agentId }) : null;
    if (createdB) assert.equal(createdB.status, 201, JSON.stringify(createdB.body));
    const convId: string = created.body.data.id;
    const convB: string = createdB?.body.data.id ?? '';
    const sandboxDir: string = created.body.data.sandbox.runner.path;
    const sandboxB: string = createdB?.body.data.sandbox.runner.path ?? '';
    const s = openStream(`${base}/api/conversations/${convId}/stream`, bootKey);
    const sB = createdB ? openStream(`${base}/api/conversations/${convB}/stream`, bootKey) : null;
    const provisionedIn = async (st: Stream) => {
      const e = await until(
        () =>
          st.events.find(
            (x) => x.data?.stage === 'provision' && (x.data?.state === 'done' || x.data?.state === 'failed'),
          ),
        'provisioning to end',
        LONG,
      );
      assert.equal(e.data.state, 'done', `provisioning failed: ${JSON.stringify(e.data.data)}`);
    };
    try {
      await Promise.all([provisionedIn(s), ...(sB ? [provisionedIn(sB)] : [])]);
      phase(sB ? 'both provisioned' : 'provisioned');

      // Turn 1 in both at once: a shell tool call that asks permission, allowed through the API.
      const token = `proof-${randomBytes(4).toString('hex')}`;
      const tokenB = `other-${randomBytes(4).toString('hex')}`;
      let agentProcesses: AgentProc[] = [];
      let agentProcessesB: AgentProc[] = [];
      // The credentials the agents hold at each launch (a sandbox token is minted per launch): no file may keep one.
      const held = new Set<string>();
      const noteHeld = (procs: AgentProc[]) => {
        for (const p of procs) for (const v of p.credentials) held.add(v);
        return procs;
      };
      // A namespace sandbox's private /tmp lives beside the sandboxes and goes with the sandbox.
      const privateTmp = (dir: string) => (nsHost ? [join(root, STATE_DIR, basename(dir), 'tmp')] : []);
      const holdingIn = async (dir: string, needles: readonly string[]) =>
        (await Promise.all([dir, ...privateTmp(dir)].map((d) => filesHolding(d, needles)))).flat();
      const [t1, t1B] = await Promise.all([
        promptToEnd(http, s, convId, `RUN: echo ${token} > ${token}.txt && cat ${token}.txt`, async () => {
          ps.push(await processListing());
          agentProcesses = noteHeld(agentProcessesOf(convId, sandboxDir));
          keyHolders.push(...(await secretHolders(key, sandboxDir)));
        }),
        sB
          ? promptToEnd(http, sB, convB, `RUN: echo ${tokenB} > ${tokenB}.txt && cat ${tokenB}.txt`, () => {
              agentProcessesB = noteHeld(agentProcessesOf(convB, sandboxB));
            })
          : null,
      ]);
      phase(sB ? 'turn 1 done in both' : 'turn 1 done');
      let edit: EditRun | null = null;
      if (full && c.writesFile) {
        const file = `written-${randomBytes(3).toString('hex')}.txt`;
        const w = await promptToEnd(
          http,
          s,
          convId,
          `WRITE: ${join(c.workdir(sandboxDir), file)} :: written by the agent`,
        );
        const turn = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
          (t) => t.id === w.turnId,
        );
        // As the conversation page builds its files panel: the stored events, read and merged, then the changes.
        const page = await http('GET', `/api/conversations/${convId}/events?limit=1000`);
        const view = (await http('GET', `/api/conversations/${convId}`)).body.data;
        const reader = new EventReader(sandboxHomes(view));
        const tools = new Map<string, ToolView>();
        for (const e of page.body.data as Json[]) {
          const item = reader.read({ ...e, turnId: e.turn_id, kind: e.kind, stream: e.stream, data: e.data } as never);
          if (item?.kind === 'tool') tools.set(item.key, item.view);
        }
        edit = { file, turn, files: fileChanges(tools.values(), view) };
        phase(`write turn ${turn?.status}: ${JSON.stringify(edit.files.map((f) => [f.path, f.added, f.removed]))}`);
      }
      let imageTurn: Json | null = null;
      if (full && c.sendsImage) {
        const i = await promptToEnd(http, s, convId, 'What is in this picture?', undefined, [
          { data: PNG_48x32.toString('base64'), media_type: 'image/png' },
        ]);
        imageTurn = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
          (t) => t.id === i.turnId,
        );
        phase(`image turn ${imageTurn?.status}`);
      }
      const permission: Json = t1.permissions[0] ?? null;
      const turnOf = async (conv: string, id: string) =>
        ((await http('GET', `/api/conversations/${conv}/turns`)).body.data as Json[]).find((t) => t.id === id);
      const firstTurn = await turnOf(convId, t1.turnId);
      const firstAnswer = answer(s.events, t1.turnId);
      const proofPath = join(c.workdir(sandboxDir), `${token}.txt`);
      const proofFile = existsSync(proofPath) ? readFileSync(proofPath, 'utf8') : null;
      const settings: Record<string, [string | null, string | null]> = {};
      const read = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8') : null);
      if (sB) for (const f of c.settingsFiles) settings[f] = [read(join(sandboxDir, f)), read(join(sandboxB, f))];

      // The skill and both MCP servers (the model calls each MCP tool, every permission allowed through the
      // API) while the other conversation recalls its own turn, before either parks.
      const delivered: Record<string, string> = {};
      for (const f of c.deliveredFiles(sandboxDir)) delivered[f] = existsSync(f) ? readFileSync(f, 'utf8') : '(absent)';
      const word = `w${randomBytes(4).toString('hex')}`;
      const [mcp, recallB] = await Promise.all([
        promptToEnd(http, s, convId, `MCP: ${word}`, () => void noteHeld(agentProcessesOf(convId, sandboxDir))),
        sB ? promptToEnd(http, sB, convB, 'RECALL what you ran before.') : null,
      ]);
      const mcpAfter = mcp.end.id ?? 0;
      phase(`MCP turn ended after ${mcp.permissions.length} permission request(s)`);
      let other: OtherRun | null = null;
      let keyInFilesB: string[] = [];
      if (sB && t1B && recallB) {
        // Searched before terminate removes it.
        keyInFilesB = await holdingIn(sandboxB, [key, mcpToken, ...held]);
        assert.equal((await http('POST', `/api/conversations/${convB}/terminate`)).status, 204);
        other = {
          sandboxDir: sandboxB,
          token: tokenB,
          firstTurn: await turnOf(convB, t1B.turnId),
          recallTurn: await turnOf(convB, recallB.turnId),
          recallAnswer: answer(sB.events, recallB.turnId),
          agentProcesses: agentProcessesB,
          settings,
          leftAfterTerminate: !(await until(() => !existsSync(sandboxB), 'the other sandbox to go', 30_000)
            .then(() => true)
            .catch(() => false)),
        };
        phase('the other conversation recalled its own turn and was terminated');
      }
      const tools: ToolsRun = {
        mcpToken,
        word,
        skillMark,
        turn: await turnOf(convId, mcp.turnId),
        answer: answer(s.events, mcp.turnId),
        permissions: mcp.permissions,
        stdio: readStdioLog(stdioLogOf(sandboxDir)),
        http: [...probe.seen],
        delivered,
      };
      const offered = [...new Set(api.asked.flatMap((a) => a.tools))].filter((n) => /probe/.test(n));
      phase(
        `MCP tools offered to the model: ${offered.join(', ') || 'none'}; stdio server saw ${tools.stdio.map((e) => e.method ?? e.tool ?? 'start').join(' ')}; http server saw ${tools.http.map((e) => `${e.method}${e.authorized ? '' : '(unauthorized)'}`).join(' ')}; skill shown to the model: ${api.asked.some((a) => JSON.stringify(a.body ?? '').includes(skillMark))}; answer: ${tools.answer.slice(0, 300)}`,
      );

      // Park after the idle timeout, then wake on the next prompt with the history kept.
      const parked = await stageAfter(s, 'sandbox', 'done', mcpAfter, 60_000);
      phase('parked');
      await c.beforeWake?.();
      const recall = await promptToEnd(http, s, convId, 'RECALL what you ran before.');
      phase('turn 2 done');
      assert.ok((recall.end.id ?? 0) > (parked.id ?? 0));
      const recallTurn = await turnOf(convId, recall.turnId);
      const recallAnswer = answer(s.events, recall.turnId);
      const isReset = (e: SseEvent) => e.data?.stage === 'session' && e.data?.data?.event === 'reset';
      const resets = s.events.filter(isReset);

      // Usage as the gateway recorded it for the account (both conversations use one model API), against
      // what the model API was asked so far.
      const usage = (await http('GET', '/api/usage?by=conversation')).body.data as Json[];
      const usageByTurn = (await http('GET', '/api/usage?by=turn')).body.data as Json[];
      const gatewayCalls = (await http('GET', '/api/usage/calls?limit=1000')).body.data as Json[];
      const askedAtUsage = api.asked.map((a) => ({ authorized: a.authorized, path: a.path }));
      keyHolders.push(...(await secretHolders(key, sandboxDir)));

      // The key is replaced while the agent runs, a second park and wake, then a key the model API refuses.
      const rotateParkAndRefuse = async () => {
        // The key is replaced while the agent runs: the very next turn uses the new one.
        const rotatedKey = `${c.keyPrefix}${randomBytes(20).toString('hex')}`;
        api.key = rotatedKey;
        const put = await http('PUT', `/api/account/inference-credentials/${c.credential}`, {
          value: rotatedKey,
          base_url: c.baseUrl(api),
        });
        assert.equal(put.status, 200, JSON.stringify(put.body));
        const callsBefore = api.asked.length;
        const rotatedToken = `rotated-${randomBytes(4).toString('hex')}`;
        const rotated = await promptToEnd(
          http,
          s,
          convId,
          `RUN: echo ${rotatedToken}`,
          () => void noteHeld(agentProcessesOf(convId, sandboxDir)),
        );
        const rotatedCalls = api.asked.slice(callsBefore).map((a) => ({ authorized: a.authorized }));
        const rotatedTurn = await turnOf(convId, rotated.turnId);
        phase(`rotated-key turn: ${rotatedTurn?.status} ${rotatedTurn?.reason ?? ''}`);

        // A second park and wake: turn 1 is still remembered (or the conversation says the session was lost).
        const parked2 = await stageAfter(s, 'sandbox', 'done', rotated.end.id ?? 0, 60_000);
        phase('parked again');
        await c.beforeWake?.();
        const recall2 = await promptToEnd(http, s, convId, 'RECALL everything you ran before.');
        assert.ok((recall2.end.id ?? 0) > (parked2.id ?? 0));
        const secondRecallTurn = await turnOf(convId, recall2.turnId);
        const secondRecallAnswer = answer(s.events, recall2.turnId);
        phase(`second wake: ${secondRecallTurn?.status}: ${secondRecallAnswer.slice(0, 200)}`);
        const allResets = s.events.filter(isReset);
        phase(`session resets: ${allResets.map((e) => JSON.stringify(e.data?.data)).join('; ') || 'none'}`);

        // The model API stops accepting the key: the next turn fails with words.
        api.key = `${c.keyPrefix}rotated${randomBytes(8).toString('hex')}`;
        const wrong3 = await promptToEnd(http, s, convId, 'Say hello.');
        const wrongKeyTurn = await turnOf(convId, wrong3.turnId);
        ps.push(await processListing());
        phase(`wrong-key turn: ${wrongKeyTurn?.status}: ${wrongKeyTurn?.reason}`);
        return {
          rotatedKey,
          rotatedToken,
          rotatedTurn,
          rotatedCalls,
          put,
          secondRecallTurn,
          secondRecallAnswer,
          allResets,
          wrongKeyTurn,
          wrongTurnId: wrong3.turnId,
        };
      };
      const later = full ? await rotateParkAndRefuse() : null;
      const dotenv = existsSync(join(sandboxDir, '.env')) ? readFileSync(join(sandboxDir, '.env'), 'utf8') : '';
      const events: Json[] = [];
      for (let after = 0; ; ) {
        const page = await http('GET', `/api/conversations/${convId}/events?after=${after}&limit=1000`);
        events.push(...(page.body.data as Json[]));
        if (!page.body.meta.has_more) break;
        after = page.body.meta.next_cursor;
      }
      const keyInFiles = [
        ...(await holdingIn(sandboxDir, [key, ...(later ? [later.rotatedKey] : []), mcpToken, ...held])),
        ...keyInFilesB,
      ];
      const conversation = await http('GET', `/api/conversations/${convId}`);
      const allTurns = await http('GET', `/api/conversations/${convId}/turns`);
      const term = await http('POST', `/api/conversations/${convId}/terminate`);
      assert.equal(term.status, 204);
      const leftAfterTerminate = !(await until(() => !existsSync(sandboxDir), 'the sandbox to go', 30_000)
        .then(() => true)
        .catch(() => false));
      // The streams end here, before their server stops under them (a cut stream fails its reader).
      s.close();
      sB?.close();
      await runner.stop();
      const runnerLog = runner.stderr();
      runner = null;
      await srv.stop();
      srv = null;
      const sharedTmpWrites = await sharedTmpWritesSince(startMarker, tmp, [
        token,
        ...(sB ? [tokenB, convB] : []),
        ...(later ? [later.rotatedToken] : []),
        skillMark,
        systemMark,
        convId,
      ]);
      return {
        backend,
        scope,
        key,
        api,
        sandboxDir,
        token,
        refusedBeforeCredential,
        validation: { wrong: { status: wrong.status, body: wrong.body }, right: right.body, list: list.body },
        firstTurn,
        firstAnswer,
        edit,
        imageTurn,
        permission,
        proofFile,
        recallTurn,
        recallAnswer,
        resets,
        allResets: later?.allResets ?? resets,
        secondRecallTurn: later?.secondRecallTurn ?? null,
        secondRecallAnswer: later?.secondRecallAnswer ?? '',
        rotatedTurn: later?.rotatedTurn ?? null,
        rotatedCalls: later?.rotatedCalls ?? [],
        rotatedKey: later?.rotatedKey ?? null,
        keyHolders,
        usage,
        usageByTurn,
        gatewayCalls,
        askedAtUsage,
        events,
        agentProcesses,
        keyInFiles,
        heldCredentials: held.size,
        sharedTmpWrites,
        leftAfterTerminate,
        other,
        wrongKeyTurn: later?.wrongKeyTurn ?? null,
        wrongKeyAcp: events
          .filter((e) => later && e.turn_id === later.wrongTurnId && e.stream !== '')
          .map((e) => String(e.data).slice(0, 600)),
        streamEvents: s.events,
        tools,
        exposures: {
          'server log': readFileSync(logFile, 'utf8'),
          'runner log': runnerLog,
          events: JSON.stringify(events),
          'SSE stream': s.raw() + (sB?.raw() ?? ''),
          conversation: JSON.stringify(conversation.body),
          turns: JSON.stringify(allTurns.body),
          'credential answers': JSON.stringify([wrong.body, right.body, list.body, later?.put.body]),
          'process listing': ps.join('\n'),
          '/home/sprite/.env': dotenv,
        },
      };
    } finally {
      s.close();
      sB?.close();
    }
  } finally {
    await runner?.stop();
    await srv?.stop();
    await api.close();
    await probe.close();
    nsHost?.close();
    if (process.env.FOUNTAIN_KEEP_REAL_AGENT_TMP) console.error(`kept ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  }
}

/** The checks every runtime's run must pass; runtime-specific ones stay in its test file. */
export function assertRealRun(c: RealAgentCase, r: RealAgentRun): void {
  assert.equal(r.refusedBeforeCredential.status, 422, JSON.stringify(r.refusedBeforeCredential.body));
  assert.equal(r.refusedBeforeCredential.body.error, 'inference_credential_missing');
  assert.match(r.refusedBeforeCredential.body.message, /\/account\/credentials/);
  assert.match(r.refusedBeforeCredential.body.message, /fountain credentials set/);
  assert.deepEqual(r.refusedBeforeCredential.sandboxes, [], 'no sandbox was created for the refused launch');

  assert.equal(r.validation.wrong.status, 422, JSON.stringify(r.validation.wrong.body));
  assert.equal(r.validation.wrong.body.error, 'credential_refused');
  assert.deepEqual(
    r.validation.list.data.map((x: Json) => [x.provider, x.base_url]),
    [[c.credential, c.baseUrl(r.api)]],
  );

  assert.ok(r.permission, 'the agent asked permission for its shell command');
  assert.equal(r.firstTurn.status, 'completed', JSON.stringify(r.firstTurn));
  assert.equal(r.proofFile?.trim(), r.token, "the command's effect is in the sandbox");
  assert.ok(
    r.firstAnswer.includes(FINAL_PREFIX) && r.firstAnswer.includes(r.token),
    `the answer streamed over SSE: ${r.firstAnswer}`,
  );
  assert.equal(r.firstTurn.model, c.model, 'the turn records the model');
  assert.ok(
    r.api.modelsAnswered.length > 0 && r.api.modelsAnswered.every((m) => m === c.modelAsked),
    `the model API was asked for ${c.modelAsked}: ${JSON.stringify(r.api.modelsAnswered)}`,
  );

  assert.equal(r.recallTurn.status, 'completed', JSON.stringify(r.recallTurn));
  assert.deepEqual(r.resets, [], 'the first wake loaded the session instead of starting a new one');
  assert.ok(
    r.recallAnswer.includes(RECALL_PREFIX) && r.recallAnswer.includes(r.token),
    `the history survived the park: ${r.recallAnswer}`,
  );

  // Where the agent runs: its cwd and HOME inside the sandbox directory the API reports; nothing in the shared /tmp.
  const inside = (dir: string, p: string) => p === dir || p.startsWith(`${dir}/`);
  const runs: Array<readonly [string, AgentProc[]]> = [[r.sandboxDir, r.agentProcesses]];
  if (r.other) runs.push([r.other.sandboxDir, r.other.agentProcesses]);
  for (const [dir, procs] of runs) {
    // On the namespace backend bubblewrap itself starts on the host (and stays pid 1 inside); what it runs is the agent.
    const agents = r.backend === 'namespace' ? procs.filter((p) => !/^\S*bwrap /.test(p.argv)) : procs;
    assert.ok(agents.length > 0, 'the agent process was found by its conversation id');
    for (const p of agents) {
      assert.ok(inside(dir, p.cwd), `cwd ${p.cwd} of ${p.argv} is inside ${dir}`);
      assert.ok(inside(dir, p.home), `HOME ${p.home} of ${p.argv} is inside ${dir}`);
    }
  }
  assert.deepEqual(r.sharedTmpWrites, [], 'nothing of the run was written to the shared temporary directory');
  assert.equal(r.leftAfterTerminate, false, 'terminate removed the sandbox directory');

  // The second conversation, the rotated key, the second park and wake: the full scope only.
  if (r.scope === 'full') assertFullRun(c, r);

  // Every event once: ids unique, no replayed message or tool call stored again in another turn. A message
  // is compared whole (its chunks joined per turn) and a replay sends one whole: two answers of the script
  // can share a first chunk ("The command ran. Its output: …"), and a recall quotes an earlier recall.
  const ids = r.events.map((e) => e.id);
  assert.equal(new Set(ids).size, ids.length, 'event ids are unique');
  const seen = new Map<string, string | null>();
  const said = new Map<string, { turn: string | null; kind: string; text: string; chunks: string[] }>();
  for (const e of r.events) {
    if (e.stream !== 'acp') continue;
    const u = JSON.parse(e.data)?.params?.update;
    const kind = u?.sessionUpdate;
    const text = String(u?.content?.text ?? '');
    if (['agent_message_chunk', 'agent_thought_chunk'].includes(kind)) {
      const k = `${e.turn_id ?? null} ${kind}`;
      const m = said.get(k) ?? { turn: e.turn_id ?? null, kind, text: '', chunks: [] as string[] };
      m.text += text;
      m.chunks.push(text);
      said.set(k, m);
      continue;
    }
    // The user's prompts and the tool calls the turns asked for; a runtime's own notices (codex: a
    // model-metadata warning and its MCP start-up as tool calls at every launch) may repeat.
    const key =
      kind === 'tool_call' && [r.token, r.tools.word].some((t) => JSON.stringify(u).includes(t))
        ? `tool_call ${u.toolCallId}`
        : kind === 'user_message_chunk' && text.length >= 12
          ? `${kind} ${text}`
          : null;
    if (!key) continue;
    if (seen.has(key))
      assert.equal(
        seen.get(key),
        e.turn_id ?? null,
        `stored again in turn ${e.turn_id} (event ${e.id}; first in turn ${seen.get(key)}): ${key.slice(0, 200)}`,
      );
    else seen.set(key, e.turn_id ?? null);
  }
  // What the model said in a turn (each answer of the script is unique to its turn) comes back in no
  // later turn, neither as that turn's whole text nor as one chunk of it.
  const messages = [...said.values()];
  for (const [i, earlier] of messages.entries()) {
    if (![FINAL_PREFIX, RECALL_PREFIX, MCP_PREFIX].some((p) => earlier.text.includes(p))) continue;
    for (const later of messages.slice(i + 1))
      assert.ok(
        later.turn === earlier.turn || (later.text !== earlier.text && !later.chunks.includes(earlier.text)),
        `stored again in turn ${later.turn} (first in turn ${earlier.turn}): ${earlier.kind} ${earlier.text.slice(0, 200)}`,
      );
  }
  for (const a of [r.recallAnswer, r.secondRecallAnswer])
    assert.ok(!a.includes(FINAL_PREFIX) && !a.includes(MCP_PREFIX), `an earlier turn's answer was replayed into: ${a}`);

  // No credential in any file of either sandbox (codex's shell snapshots held it once).
  assert.deepEqual(
    r.keyInFiles,
    [],
    "no file of either sandbox holds the key, the environment's secret or a credential the agent held",
  );
  // At least each conversation's sandbox token was found in its agent's environment and searched for.
  assert.ok(r.heldCredentials >= (r.other ? 2 : 1), `credentials the agents held: ${r.heldCredentials}`);

  // Gateway delivery: the real key never entered a sandbox, and every model call went through the gateway.
  assert.deepEqual(r.keyHolders, [], 'the real key is in no process environment and no sandbox file');
  // The model API saw the real key only on connections of the server's own process (its gateway, and
  // the credential's validation), never on one an agent's process opened.
  assert.deepEqual(
    r.api.asked.filter((a) => a.authorized && !a.fromServer).map((a) => `${a.method} ${a.path}`),
    [],
    'every request carrying the real key came through the gateway',
  );
  assert.ok(
    r.api.asked.some((a) => a.fromServer),
    'the model API tells where its requests came from',
  );
  const generating = r.askedAtUsage.filter(
    (a) =>
      a.authorized && /\/v1\/messages$|\/responses$|\/chat\/completions$|:(stream)?[gG]enerateContent$/.test(a.path),
  );
  // Token counts are not metered: Anthropic's count_tokens, Gemini's countTokens (gemini-cli counts a prompt's images).
  const metered = r.gatewayCalls.filter(
    (x) => x.status === 200 && x.refused === null && x.endpoint !== 'count_tokens' && x.endpoint !== 'countTokens',
  );
  assert.ok(generating.length > 0, 'the model API answered calls');
  assert.ok(
    r.gatewayCalls.filter((x) => x.refused === null).length >= r.askedAtUsage.filter((a) => a.authorized).length - 1,
    `every authorized call came through the gateway: ${r.gatewayCalls.length} gateway rows, ${r.askedAtUsage.length} asked`,
  );
  // The local model API reports 120 input and 12 output tokens on every generating call.
  const total = (k: string) => r.usage.reduce((n, g) => n + Number(g[k] ?? 0), 0);
  assert.equal(total('input_tokens'), 120 * metered.length, JSON.stringify(r.usage));
  assert.equal(total('output_tokens'), 12 * metered.length, JSON.stringify(r.usage));
  assert.equal(metered.length, generating.length, 'the gateway metered each call the model API answered');
  const firstTurnUsage = r.usageByTurn.find((g) => g.key === r.firstTurn.id);
  assert.ok(firstTurnUsage && firstTurnUsage.input_tokens > 0, `usage by turn: ${JSON.stringify(r.usageByTurn)}`);

  for (const [where, text] of Object.entries(r.exposures)) {
    assert.ok(!text.includes(r.key), `the credential appears in the ${where}`);
    assert.ok(!text.includes(r.tools.mcpToken), `the MCP server's secret appears in the ${where}`);
  }
  assert.ok(
    r.exposures['process listing']!.length > 0 && r.exposures['server log']!.length > 0,
    'there was something to search',
  );
}

/** The full scope's own checks: two conversations at once, a rotated key, a second park and wake, a refused key. */
function assertFullRun(c: RealAgentCase, r: RealAgentRun): void {
  const other = r.other;
  assert.ok(other, 'the second conversation ran');
  // Two conversations of the same runtime at once: their own settings and histories.
  assert.notEqual(other.sandboxDir, r.sandboxDir);
  assert.equal(other.firstTurn?.status, 'completed', JSON.stringify(other.firstTurn));
  assert.equal(other.recallTurn?.status, 'completed', JSON.stringify(other.recallTurn));
  assert.ok(
    other.recallAnswer.includes(other.token) && !other.recallAnswer.includes(r.token),
    `the other conversation remembers its own turn only: ${other.recallAnswer}`,
  );
  for (const [f, [mine, theirs]] of Object.entries(other.settings))
    assert.ok(mine !== null && theirs !== null, `each conversation has its own ${f}`);
  assert.equal(other.leftAfterTerminate, false, "terminate removed the other conversation's sandbox");

  // A replaced key is the one the very next turn uses.
  assert.equal(r.rotatedTurn?.status, 'completed', JSON.stringify(r.rotatedTurn));
  assert.ok(
    r.rotatedCalls.length > 0 && r.rotatedCalls.every((a) => a.authorized),
    `the turn after the rotation used the new key: ${JSON.stringify(r.rotatedCalls)}`,
  );

  // The second park and wake: turn 1 still remembered; a lost session is said in words.
  assert.equal(r.secondRecallTurn?.status, 'completed', JSON.stringify(r.secondRecallTurn));
  for (const e of r.allResets) assert.ok(String(e.data?.data?.detail ?? '').length > 10, JSON.stringify(e.data));
  if (c.runtime !== 'gemini') assert.deepEqual(r.allResets, [], 'every wake loaded the session');
  assert.ok(
    r.secondRecallAnswer.includes(RECALL_PREFIX) && r.secondRecallAnswer.includes(r.token),
    `turn 1 survived the second park: ${r.secondRecallAnswer}`,
  );

  assert.equal(r.wrongKeyTurn.status, 'failed', `${JSON.stringify(r.wrongKeyTurn)}\n${r.wrongKeyAcp.join('\n')}`);
  assert.match(
    String(r.wrongKeyTurn.reason),
    /refused by the model API: set it again on the Model credentials page \(\/account\/credentials\)/,
    'the failed turn says why and what to do',
  );
  assert.ok(
    String(r.wrongKeyTurn.reason).includes(`fountain credentials set ${c.credential}`),
    `the failed turn names the credential and the command: ${r.wrongKeyTurn.reason}`,
  );
  assert.ok(
    r.api.asked.some((a) => !a.authorized),
    'the model API refused the rotated key',
  );
}

/**
 * The skill and both MCP servers reached the runtime: each server saw the runtime's initialize and
 * tools/list (the HTTP one with the secret from the environment), the model was offered both tools and
 * shown the skill, each tool was called and its answer came back into the agent's answer.
 */
export function assertToolsReached(r: RealAgentRun, o: { readonly mcpCallsAsk: boolean }): void {
  const t = r.tools;
  const why = () =>
    JSON.stringify(
      {
        answer: t.answer,
        turn: t.turn,
        stdio: t.stdio,
        http: t.http,
        delivered: t.delivered,
        offered: [...new Set(r.api.asked.flatMap((a) => a.tools))],
      },
      null,
      1,
    );
  const stdioMethods = t.stdio.map((e) => e.method);
  assert.ok(
    stdioMethods.includes('initialize') && stdioMethods.includes('tools/list'),
    `the stdio server was started and listed by the runtime: ${why()}`,
  );
  const httpMethods = t.http.filter((e) => e.authorized).map((e) => e.method);
  assert.ok(
    httpMethods.includes('initialize') && httpMethods.includes('tools/list'),
    `the HTTP server was reached with the environment's secret: ${why()}`,
  );
  const offered = r.api.asked.flatMap((a) => a.tools);
  assert.ok(
    offered.some((n) => n.includes(STDIO_TOOL)) && offered.some((n) => n.includes(HTTP_TOOL)),
    `the model was offered both MCP tools: ${why()}`,
  );
  assert.ok(
    r.api.asked.some((a) => JSON.stringify(a.body ?? '').includes(t.skillMark)),
    `the model was shown the skill's description: ${why()}`,
  );
  assert.ok(
    t.stdio.some((e) => e.tool === STDIO_TOOL && e.text === t.word),
    `the stdio tool was called: ${why()}`,
  );
  assert.ok(
    t.http.some((e) => e.method === 'tools/call' && e.authorized && JSON.stringify(e.params).includes(t.word)),
    `the HTTP tool was called: ${why()}`,
  );
  assert.equal(t.turn?.status, 'completed', why());
  // The agent's policy is `ask`: each MCP call reached it as a permission request, answered through the API.
  if (o.mcpCallsAsk)
    assert.equal(t.permissions.length, 2, `each MCP call asked permission: ${JSON.stringify(t.permissions)}`);
  assert.ok(
    t.answer.includes(MCP_PREFIX) &&
      t.answer.includes(`fountain-stdio-saw:${t.word}`) &&
      t.answer.includes(`fountain-http-saw:${t.word}`),
    `both tools' answers came back: ${why()}`,
  );
}
