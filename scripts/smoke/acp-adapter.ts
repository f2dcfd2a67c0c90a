/**
 * Live smoke of a real third-party ACP adapter through Fountain: a real server, a real `fountain runner`
 * (process backend), an agent of runtime claude or gemini, the adapter installed from the npm registry.
 *
 * Usage: npx tsx scripts/smoke/acp-adapter.ts [claude|gemini]
 * It downloads from the npm registry, so it is not part of `npm test`. It runs without any model key:
 * the conversation must reach `initialize` and `session/new`, and the turn must fail with a clear
 * reason within a bounded time instead of hanging.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../../src/providers/runner/index.ts';
import { startRunnerChild, type RunnerChild } from '../../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../../src/server/start.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const runtime = process.argv[2] ?? 'claude';
const MODELS: Record<string, string> = { claude: 'anthropic/claude-sonnet-4-5', gemini: 'google/gemini-2.5-flash' };
if (!MODELS[runtime]) {
  console.error(`usage: npx tsx scripts/smoke/acp-adapter.ts [claude|gemini] (got ${runtime})`);
  process.exit(2);
}
/** Provisioning may download the adapter (the engine's install budget is 180 s); the turn must end well within this. */
const PROVISION_BUDGET_MS = 300_000;
const TURN_BUDGET_MS = 240_000;
const TURN_TIMEOUT_MS = 90_000;

// No model key may reach the sandbox: the point is that the turn fails cleanly without one.
for (const k of [
  'ANTHROPIC_API_KEY',
  'CLAUDE_CODE_OAUTH_TOKEN',
  'ANTHROPIC_AUTH_TOKEN',
  'GEMINI_API_KEY',
  'GOOGLE_API_KEY',
  'OPENAI_API_KEY',
])
  delete process.env[k];

const t0 = Date.now();
const stamp = () => `[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s]`;
const say = (s: string) => console.log(`${stamp()} ${s}`);
const clip = (s: string, n = 400) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);
let failures = 0;
function check(what: string, cond: boolean, detail = ''): void {
  if (!cond) failures++;
  say(`${cond ? 'ok  ' : 'FAIL'} ${what}${detail ? ` — ${detail}` : ''}`);
}

async function call(
  base: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-acp-smoke-')));
  let srv: RunningServer | null = null;
  let runner: RunnerChild | null = null;
  try {
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { idleTimeoutMs: 0, turnSilenceTimeoutMs: TURN_TIMEOUT_MS },
    });
    const key = srv.bootstrapKey!;
    const api = (method: string, path: string, body?: unknown) => call(srv!.url, key, method, path, body);
    say(`server at ${srv.url} (PGlite in ${tmp}/data)`);
    runner = startRunnerChild({
      name: 'smoke',
      root: join(tmp, 'sandboxes'),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
    });
    for (let i = 0; ; i++) {
      const r = await api('GET', '/api/runners');
      if ((r.body.data as Json[]).some((x) => x.online)) break;
      if (i > 600) throw new Error(`the runner never came online: ${runner.stderr()}`);
      await sleep(100);
    }
    say(`runner "smoke" online (process backend, root ${tmp}/sandboxes)`);

    const agent = await api('POST', '/api/agents', {
      name: `smoke-${runtime}`,
      runtime,
      model: MODELS[runtime],
      system: 'You are a smoke test.',
    });
    check(
      `POST /api/agents runtime=${runtime} model=${MODELS[runtime]}`,
      agent.status === 201,
      `${agent.status} ${JSON.stringify(agent.body).slice(0, 200)}`,
    );
    const conv = await api('POST', '/api/conversations', { agent_id: agent.body.data.id });
    check('POST /api/conversations', conv.status === 201, `${conv.status} sandbox ${conv.body.data?.sandbox?.name}`);
    const id: string = conv.body.data.id;

    let cursor = 0;
    const seen: Json[] = [];
    const pump = async () => {
      for (;;) {
        const page = await api('GET', `/api/conversations/${id}/events?after=${cursor}&limit=1000`);
        for (const e of page.body.data as Json[]) {
          seen.push(e);
          cursor = e.id;
          const data = clip(typeof e.data === 'string' ? e.data.trim() : JSON.stringify(e.data));
          if (e.stage)
            say(`event ${e.id} ${e.stage}/${e.state}${e.duration_ms != null ? ` (${e.duration_ms} ms)` : ''} ${data}`);
          else say(`event ${e.id} ${e.stream}: ${data}`);
        }
        if (!page.body.meta.has_more) return;
      }
    };

    const provStart = Date.now();
    let status = '';
    while (Date.now() - provStart < PROVISION_BUDGET_MS) {
      await pump();
      status = (await api('GET', `/api/conversations/${id}`)).body.data.status;
      if (status !== 'pending') break;
      await sleep(500);
    }
    await pump();
    const got = (await api('GET', `/api/conversations/${id}`)).body.data;
    check(
      'provisioning finished (conversation idle)',
      got.status === 'idle',
      `status ${got.status}${got.failure_reason ? `, reason: ${got.failure_reason}` : ''}`,
    );
    check(
      'runtime_session_id recorded from session/new',
      typeof got.runtime_session_id === 'string' && got.runtime_session_id.length > 0,
      String(got.runtime_session_id),
    );
    const acp = seen.filter((e) => e.stream === 'acp').map((e) => JSON.parse(e.data));
    const initReply = acp.find((m) => m.id !== undefined && m.result?.protocolVersion !== undefined);
    const newReply = acp.find((m) => m.id !== undefined && typeof m.result?.sessionId === 'string');
    check(
      'initialize answered by the adapter',
      !!initReply,
      initReply
        ? `agentInfo ${JSON.stringify(initReply.result.agentInfo)} protocolVersion ${initReply.result.protocolVersion}`
        : '',
    );
    check(
      'session/new answered by the adapter',
      !!newReply && newReply.result.sessionId === got.runtime_session_id,
      newReply ? `sessionId ${newReply.result.sessionId}` : '',
    );
    if (got.status !== 'idle') return;

    const sent = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'Say hello in one word.' });
    check(
      'POST /prompts queued',
      sent.status === 202 || sent.status === 200,
      `${sent.status} ${JSON.stringify(sent.body)}`,
    );
    const turnId: string = sent.body.turn_id ?? sent.body.data?.turn_id;
    const turnStart = Date.now();
    let turn: Json = null;
    while (Date.now() - turnStart < TURN_BUDGET_MS) {
      await pump();
      const turns = (await api('GET', `/api/conversations/${id}/turns`)).body.data as Json[];
      turn = turns.find((t) => t.id === turnId);
      if (turn && !['pending', 'running'].includes(turn.status)) break;
      await sleep(500);
    }
    await pump();
    const took = ((Date.now() - turnStart) / 1000).toFixed(1);
    check(
      `the turn ended without a model key (after ${took} s)`,
      !!turn && !['pending', 'running'].includes(turn.status),
      `status ${turn?.status}`,
    );
    check(
      'the turn failed with a reason',
      turn?.status === 'failed' && typeof turn.reason === 'string' && turn.reason.length > 0,
      `reason: ${turn?.reason}`,
    );

    const term = await api('POST', `/api/conversations/${id}/terminate`);
    check('terminate', term.status >= 200 && term.status < 300, String(term.status));
    await sleep(300);
    await pump();
  } finally {
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}

main()
  .then(() => {
    say(failures === 0 ? 'ACP_ADAPTER_SMOKE_OK' : `ACP_ADAPTER_SMOKE_FAILED ${failures}`);
    process.exit(failures === 0 ? 0 : 1);
  })
  .catch((e: unknown) => {
    say(`ACP_ADAPTER_SMOKE_FAILED ${e instanceof Error ? e.stack : String(e)}`);
    process.exit(1);
  });
