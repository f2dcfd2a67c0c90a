/**
 * One real conversation with a real coding agent, as a user would have it: the adapter installed from
 * the npm registry into a runner sandbox by provisioning, its credential and base_url set through
 * the public API, a local model API speaking the vendor's wire format. Each runtime's test calls
 * `realAgentConversation` once and asserts on what it returns and on what the run left behind.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  type Dirent,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { acceptRunnerSocket } from '../../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../../src/server/start.ts';
import { answer, call, openStream, type Json, type SseEvent, type Stream } from '../helpers/http.ts';
import type { ModelApiServer } from '../model-apis/server.ts';
import { FINAL_PREFIX, MCP_PREFIX, RECALL_PREFIX } from '../model-apis/script.ts';
import {
  HTTP_TOOL,
  readStdioLog,
  startHttpProbe,
  STDIO_FIXTURE,
  STDIO_TOOL,
  type HttpProbe,
  type McpSeen,
} from './mcp-probe.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
/** The persistent npm cache `.ci/run` pre-warms: sandbox installs read the adapters from it. */
export const NPM_CACHE = join(REPO, '.cache', 'npm');

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
  /** Host paths of the files §13 prescribes for this runtime's skill and MCP delivery, read after provisioning. */
  deliveredFiles(sandboxDir: string): string[];
}

export interface RealAgentRun {
  readonly key: string;
  readonly api: ModelApiServer;
  readonly sandboxDir: string;
  readonly token: string;
  readonly refusedBeforeCredential: Json;
  readonly validation: { wrong: Json; right: Json; list: Json };
  readonly firstTurn: Json;
  readonly firstAnswer: string;
  readonly permission: Json;
  readonly proofFile: string | null;
  readonly recallTurn: Json;
  readonly recallAnswer: string;
  readonly resets: SseEvent[];
  readonly wrongKeyTurn: Json;
  /** What the agent said in the wrong-key turn (ACP lines), for the failure message. */
  readonly wrongKeyAcp: string[];
  readonly streamEvents: SseEvent[];
  /** Everything the run wrote where a secret must not be: logs, events, errors, `ps`, `.env`. */
  readonly exposures: Record<string, string>;
  /** The agent's skill and MCP servers (§13): what reached the runtime and what came back. */
  readonly tools: ToolsRun;
  /** Where the real key was found: process environments on this machine, `ps eww`, the sandbox's files. */
  readonly keyHolders: string[];
  /** The gateway's usage of the conversation (one row) and its audit rows, read before the budget turn. */
  readonly usage: Json[];
  readonly usageByTurn: Json[];
  readonly gatewayCalls: Json[];
  /** The turn prompted with a token budget of what the conversation had already used. */
  readonly budget: { turn: Json; answer: string; asked: number; limit: number };
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

function processListing(): string {
  try {
    return execFileSync('ps', ['-eo', 'pid,args', '--no-headers'], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    return `ps failed: ${String(e)}`;
  }
}

/** Every process environment on this machine (`ps eww`, each process environ file) and every sandbox file holding `secret`. */
function secretHolders(secret: string, sandboxDir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`).includes(secret)) found.push(`/proc/${pid}/environ`);
    } catch {
      // The process ended while the scan ran.
    }
  }
  try {
    const ps = execFileSync('ps', ['eww', '-e', '-o', 'pid,args'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    if (ps.includes(secret)) found.push('ps eww');
  } catch (e) {
    found.push(`ps failed: ${String(e)}`);
  }
  const walk = (dir: string) => {
    let entries: Dirent[] = [];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        try {
          if (readFileSync(p).includes(secret)) found.push(p);
        } catch {
          // Unreadable or gone.
        }
      }
    }
  };
  walk(sandboxDir);
  return found;
}

export async function realAgentConversation(c: RealAgentCase): Promise<RealAgentRun> {
  const key = `${c.keyPrefix}${randomBytes(20).toString('hex')}`;
  const api = await c.startApi(key);
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), `fountain-real-${c.runtime}-`)));
  const logFile = join(tmp, 'server.log');
  mkdirSync(NPM_CACHE, { recursive: true });
  const mcpToken = `mcp-secret-${randomBytes(12).toString('hex')}`;
  const probe: HttpProbe = await startHttpProbe(mcpToken);
  const stdioLog = join(tmp, 'mcp-stdio.jsonl');
  const skillMark = `fountain-skill-${randomBytes(6).toString('hex')}`;
  let srv: RunningServer | null = null;
  let runner: RunnerChild | null = null;
  const ps: string[] = [];
  const keyHolders: string[] = [];
  const t0 = Date.now();
  const phase = (what: string) => console.error(`[${c.runtime} ${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
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
      extraArgs: ['--npm-cache', NPM_CACHE],
    });
    await until(
      async () => ((await http('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );

    // The environment holds what the MCP servers' `${VAR}`s name: a variable for the port and the log, a secret for the token.
    const env = await http('POST', '/api/environments', {
      name: `real-${c.runtime}-tools`,
      env_vars: { PROBE_HTTP_PORT: String(probe.port), PROBE_STDIO_LOG: stdioLog },
      secrets: { PROBE_HTTP_TOKEN: mcpToken },
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await http('POST', '/api/agents', {
      name: `real-${c.runtime}`,
      runtime: c.runtime,
      model: c.model,
      system: 'You are a test agent.',
      permission_policy: { default: 'ask' },
      environment_id: env.body.data.id,
      skills: [probeSkill(skillMark)],
      // Hyphens, not underscores: gemini splits `mcp_<server>_<tool>` at the first underscore.
      mcp_servers: {
        'probe-stdio': { command: 'node', args: [STDIO_FIXTURE, '${PROBE_STDIO_LOG}'] },
        'probe-http': {
          type: 'http',
          url: 'http://127.0.0.1:${PROBE_HTTP_PORT}/mcp',
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
    const convId: string = created.body.data.id;
    const sandboxDir: string = created.body.data.sandbox.runner.path;
    const s = openStream(`${base}/api/conversations/${convId}/stream`, bootKey);
    try {
      const provisioned = await until(
        () =>
          s.events.find(
            (e) => e.data?.stage === 'provision' && (e.data?.state === 'done' || e.data?.state === 'failed'),
          ),
        'provisioning to end',
        LONG,
      );
      phase('provisioned');
      assert.equal(provisioned.data.state, 'done', `provisioning failed: ${JSON.stringify(provisioned.data.data)}`);

      // Turn 1: a shell tool call that asks permission, allowed through the API.
      const token = `proof-${randomBytes(4).toString('hex')}`;
      const p1 = await http('POST', `/api/conversations/${convId}/prompts`, {
        prompt: `RUN: echo ${token} > ${token}.txt && cat ${token}.txt`,
      });
      assert.equal(p1.status, 200, JSON.stringify(p1.body));
      const asked = await until(
        () =>
          s.events.find((e) => e.data?.stage === 'permission' && e.data?.state === 'started') ??
          s.events.find((e) => e.data?.stage === 'turn' && e.data?.state === 'done'),
        'a permission request (or the turn ending without one)',
        LONG,
      );
      phase('permission asked');
      let permission: Json = null;
      if (asked.data.stage === 'permission') {
        ps.push(processListing());
        keyHolders.push(...secretHolders(key, sandboxDir));
        permission = typeof asked.data.data === 'string' ? JSON.parse(asked.data.data) : asked.data.data;
        const allow =
          (permission.options as Json[]).find((o) => o.kind === 'allow_once') ??
          (permission.options as Json[]).find((o) => String(o.kind).startsWith('allow'));
        const yes = await http('POST', `/api/conversations/${convId}/requests/${permission.request_id}`, {
          option_id: allow.option_id,
        });
        assert.equal(yes.status, 200, JSON.stringify(yes.body));
      }
      const t1done = await stageAfter(s, 'turn', 'done', asked.id ?? 0);
      phase('turn 1 done');
      const turns1 = (await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[];
      const firstTurn = turns1.find((t) => t.id === p1.body.turn_id);
      const firstAnswer = answer(s.events, p1.body.turn_id);
      const proofPath = join(c.workdir(sandboxDir), `${token}.txt`);
      const proofFile = existsSync(proofPath) ? readFileSync(proofPath, 'utf8') : null;

      // The skill and both MCP servers: the model calls each MCP tool, every permission is allowed through the API.
      const delivered: Record<string, string> = {};
      for (const f of c.deliveredFiles(sandboxDir)) delivered[f] = existsSync(f) ? readFileSync(f, 'utf8') : '(absent)';
      const word = `w${randomBytes(4).toString('hex')}`;
      const pm = await http('POST', `/api/conversations/${convId}/prompts`, { prompt: `MCP: ${word}` });
      assert.equal(pm.status, 200, JSON.stringify(pm.body));
      const mcpPermissions: Json[] = [];
      let mcpAfter = t1done.id ?? 0;
      for (;;) {
        const e = await until(
          () =>
            s.events.find(
              (x) =>
                (x.id ?? 0) > mcpAfter &&
                ((x.data?.stage === 'permission' && x.data?.state === 'started') ||
                  (x.data?.stage === 'turn' && ['done', 'failed'].includes(x.data?.state))),
            ),
          'a permission request or the end of the MCP turn',
          LONG,
        );
        mcpAfter = e.id ?? mcpAfter;
        if (e.data.stage === 'turn') break;
        const req = typeof e.data.data === 'string' ? JSON.parse(e.data.data) : e.data.data;
        mcpPermissions.push(req);
        const allow =
          (req.options as Json[]).find((o) => o.kind === 'allow_once') ??
          (req.options as Json[]).find((o) => String(o.kind).startsWith('allow'));
        const yes = await http('POST', `/api/conversations/${convId}/requests/${req.request_id}`, {
          option_id: allow.option_id,
        });
        assert.equal(yes.status, 200, JSON.stringify(yes.body));
      }
      phase(`MCP turn ended after ${mcpPermissions.length} permission request(s)`);
      const mcpTurn = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
        (t) => t.id === pm.body.turn_id,
      );
      const tools: ToolsRun = {
        mcpToken,
        word,
        skillMark,
        turn: mcpTurn,
        answer: answer(s.events, pm.body.turn_id),
        permissions: mcpPermissions,
        stdio: readStdioLog(stdioLog),
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
      const p2 = await http('POST', `/api/conversations/${convId}/prompts`, { prompt: 'RECALL what you ran before.' });
      assert.equal(p2.status, 200, JSON.stringify(p2.body));
      const t2done = await stageAfter(s, 'turn', 'done', parked.id!);
      phase('turn 2 done');
      const recallTurn = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
        (t) => t.id === p2.body.turn_id,
      );
      const recallAnswer = answer(s.events, p2.body.turn_id);
      const resets = s.events.filter((e) => e.data?.stage === 'session' && e.data?.data?.event === 'reset');

      // Usage as the gateway recorded it, against what the model API reported on each call.
      const usage = (await http('GET', `/api/usage?by=conversation&conversation_id=${convId}`)).body.data as Json[];
      const usageByTurn = (await http('GET', `/api/usage?by=turn&conversation_id=${convId}`)).body.data as Json[];
      const gatewayCalls = (await http('GET', `/api/usage/calls?conversation_id=${convId}&limit=1000`)).body
        .data as Json[];
      keyHolders.push(...secretHolders(key, sandboxDir));

      // A budget of what the conversation has already used: the next call is refused and the turn says why.
      const used = Number(usage[0]?.input_tokens ?? 0) + Number(usage[0]?.output_tokens ?? 0);
      const limited = await http('PATCH', `/api/agents/${agentId}`, {
        model_limits: { tokens_per_conversation: Math.max(1, used) },
      });
      assert.equal(limited.status, 200, JSON.stringify(limited.body));
      const askedBeforeBudget = api.asked.length;
      const pb = await http('POST', `/api/conversations/${convId}/prompts`, { prompt: 'RUN: echo over-budget' });
      assert.equal(pb.status, 200, JSON.stringify(pb.body));
      const budgetTurn = await until(
        async () => {
          const t = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
            (x) => x.id === pb.body.turn_id,
          );
          return t && !['pending', 'running'].includes(t.status) ? t : null;
        },
        'the over-budget turn to end',
        LONG,
      );
      const budgetAnswer = answer(s.events, pb.body.turn_id);
      const budgetAsked = api.asked.length - askedBeforeBudget;
      phase(`over-budget turn: ${budgetTurn.status}: ${budgetTurn.reason}; answer: ${budgetAnswer.slice(0, 300)}`);
      const unlimited = await http('PATCH', `/api/agents/${agentId}`, { model_limits: {} });
      assert.equal(unlimited.status, 200, JSON.stringify(unlimited.body));
      const budgetDone = await until(
        () =>
          s.events.find(
            (e) =>
              (e.id ?? 0) > t2done.id! &&
              e.data?.stage === 'turn' &&
              ['done', 'failed', 'interrupted'].includes(e.data?.state),
          ),
        'the over-budget turn on the stream',
        LONG,
      );

      // The model API stops accepting the key: the next turn fails with words.
      api.key = `${c.keyPrefix}rotated${randomBytes(8).toString('hex')}`;
      await stageAfter(s, 'sandbox', 'done', budgetDone.id!, 60_000);
      phase('parked again');
      const p3 = await http('POST', `/api/conversations/${convId}/prompts`, { prompt: 'Say hello.' });
      assert.equal(p3.status, 200, JSON.stringify(p3.body));
      await until(
        async () => {
          const t = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
            (x) => x.id === p3.body.turn_id,
          );
          return t && !['pending', 'running'].includes(t.status) ? t : null;
        },
        'the wrong-key turn to end',
        LONG,
      );
      phase('wrong-key turn ended');
      const wrongKeyTurn = ((await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[]).find(
        (x) => x.id === p3.body.turn_id,
      );
      ps.push(processListing());
      phase(`wrong-key turn: ${wrongKeyTurn?.status}: ${wrongKeyTurn?.reason}`);

      const dotenv = existsSync(join(sandboxDir, '.env')) ? readFileSync(join(sandboxDir, '.env'), 'utf8') : '';
      const events: Json[] = [];
      for (let after = 0; ; ) {
        const page = await http('GET', `/api/conversations/${convId}/events?after=${after}&limit=1000`);
        events.push(...(page.body.data as Json[]));
        if (!page.body.meta.has_more) break;
        after = page.body.meta.next_cursor;
      }
      const conversation = await http('GET', `/api/conversations/${convId}`);
      const allTurns = await http('GET', `/api/conversations/${convId}/turns`);
      const term = await http('POST', `/api/conversations/${convId}/terminate`);
      assert.equal(term.status, 204);
      await sleep(200);
      await runner.stop();
      const runnerLog = runner.stderr();
      runner = null;
      await srv.stop();
      srv = null;
      return {
        key,
        api,
        sandboxDir,
        token,
        refusedBeforeCredential,
        validation: { wrong: { status: wrong.status, body: wrong.body }, right: right.body, list: list.body },
        firstTurn,
        firstAnswer,
        permission,
        proofFile,
        recallTurn,
        recallAnswer,
        resets,
        wrongKeyTurn,
        wrongKeyAcp: events
          .filter((e) => e.turn_id === p3.body.turn_id && e.stream !== '')
          .map((e) => String(e.data).slice(0, 600)),
        streamEvents: s.events,
        tools,
        keyHolders,
        usage,
        usageByTurn,
        gatewayCalls,
        budget: { turn: budgetTurn, answer: budgetAnswer, asked: budgetAsked, limit: Math.max(1, used) },
        exposures: {
          'server log': readFileSync(logFile, 'utf8'),
          'runner log': runnerLog,
          events: JSON.stringify(events),
          'SSE stream': s.raw(),
          conversation: JSON.stringify(conversation.body),
          turns: JSON.stringify(allTurns.body),
          'credential answers': JSON.stringify([wrong.body, right.body, list.body]),
          'process listing': ps.join('\n'),
          '/home/sprite/.env': dotenv,
        },
      };
    } finally {
      s.close();
    }
  } finally {
    await runner?.stop();
    await srv?.stop();
    await api.close();
    await probe.close();
    rmSync(tmp, { recursive: true, force: true });
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
  assert.deepEqual(r.resets, [], 'the wake loaded the session instead of starting a new one');
  assert.ok(
    r.recallAnswer.includes(RECALL_PREFIX) && r.recallAnswer.includes(r.token),
    `the history survived the park: ${r.recallAnswer}`,
  );

  assert.equal(r.wrongKeyTurn.status, 'failed', `${JSON.stringify(r.wrongKeyTurn)}\n${r.wrongKeyAcp.join('\n')}`);
  assert.match(
    String(r.wrongKeyTurn.reason),
    /refused by the model API: set it again on the Model credentials page \(\/account\/credentials\)/,
    'the failed turn says why and what to do',
  );
  assert.ok(
    r.api.asked.some((a) => !a.authorized),
    'the model API refused the rotated key',
  );

  // Gateway delivery: the real key never entered the sandbox, and every model call went through the gateway.
  assert.deepEqual(r.keyHolders, [], 'the real key is in no process environment and no sandbox file');
  const generating = r.api.asked.filter(
    (a) =>
      a.authorized && /\/v1\/messages$|\/responses$|\/chat\/completions$|:(stream)?[gG]enerateContent$/.test(a.path),
  );
  const metered = r.gatewayCalls.filter((x) => x.status === 200 && x.refused === null && x.endpoint !== 'count_tokens');
  assert.ok(generating.length > 0, 'the model API answered calls');
  assert.ok(
    r.gatewayCalls.filter((x) => x.refused === null).length >= r.api.asked.filter((a) => a.authorized).length - 1,
    `every authorized call came through the gateway: ${r.gatewayCalls.length} gateway rows, ${r.api.asked.length} asked`,
  );
  // The local model API reports 120 input and 12 output tokens on every generating call.
  assert.equal(r.usage[0]?.input_tokens, 120 * metered.length, JSON.stringify(r.usage));
  assert.equal(r.usage[0]?.output_tokens, 12 * metered.length, JSON.stringify(r.usage));
  assert.equal(metered.length, generating.length, 'the gateway metered each call the model API answered');
  // Each call is attributed to the turn running when it began: the first turn's calls are under its id.
  const firstTurnUsage = r.usageByTurn.find((g) => g.key === r.firstTurn.id);
  assert.ok(firstTurnUsage && firstTurnUsage.input_tokens > 0, `usage by turn: ${JSON.stringify(r.usageByTurn)}`);
  assert.equal(
    r.usageByTurn.reduce((n, g) => n + g.input_tokens, 0),
    r.usage[0]?.input_tokens,
    'the turns add up to the conversation',
  );
  const sentence = new RegExp(`token budget tokens_per_conversation = ${r.budget.limit} is spent`);
  assert.equal(r.budget.asked, 0, 'the over-budget call never reached the model API');
  assert.ok(
    sentence.test(String(r.budget.turn.reason ?? '')) || sentence.test(r.budget.answer),
    `the over-budget turn names the budget: ${JSON.stringify(r.budget)}`,
  );

  for (const [where, text] of Object.entries(r.exposures)) {
    assert.ok(!text.includes(r.key), `the credential appears in the ${where}`);
    assert.ok(!text.includes(r.tools.mcpToken), `the MCP server's secret appears in the ${where}`);
  }
  assert.ok(
    r.exposures['process listing']!.length > 0 && r.exposures['server log']!.length > 0,
    'there was something to search',
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
