import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { taggedArgv } from './agent-process.ts';
import { loosening } from './policy.ts';
import { RUNTIME_SPECS, SANDBOX_HOME, dotenv, modelProblem, promptFailureReason } from '../runtimes/table.ts';
import { RefusalWatch } from './model-refusal.ts';
import { KeyedLock } from './lock.ts';
import { silenceReason } from './turn/machine.ts';
import { platformMcpServers } from './sandbox-token.ts';

import { modelOptionToSet } from './model-option.ts';
describe('permission policy', () => {
  it('loosening finds any lookup where a child would decide looser than its parent (issue 22 #6)', () => {
    assert.equal(loosening({ execute: 'ask' }, { execute: 'ask' }), null);
    assert.equal(loosening({ default: 'ask' }, { execute: 'ask' }), null);
    assert.equal(loosening({ default: 'auto_deny' }, { default: 'ask', read: 'auto_allow' }), null);
    assert.match(loosening({}, { execute: 'ask' }) ?? '', /execute would be auto_allow/);
    assert.match(
      loosening({ default: 'ask', 'Run `ls`': 'auto_allow' }, { default: 'ask' }) ?? '',
      /Run `ls` would be auto_allow/,
    );
    assert.match(
      loosening({ execute: 'ask' }, { 'Run `rm`': 'auto_deny' }) ?? '',
      /Run `rm` would be auto_allow, where the parent's policy says auto_deny/,
    );
    assert.match(loosening({ default: 'ask' }, { default: 'auto_deny' }) ?? '', /would be ask/);
  });
});

describe('runtimes', () => {
  it('checks only the model provider against the runtime', () => {
    assert.equal(modelProblem('claude', 'anthropic/anything-new'), null);
    assert.match(modelProblem('claude', 'openai/gpt-5') ?? '', /anthropic/);
    assert.equal(modelProblem('opencode', 'google/x'), null);
    assert.equal(modelProblem('demo', 'fountain/demo'), null);
    assert.match(modelProblem('demo', 'Fountain Demo') ?? '', /provider\/model_id/);
  });
  it('writes .env values single-quoted so a shell reads them back verbatim', () => {
    const text = dotenv([
      ['A', "it's $HOME `x`"],
      ['B', 'plain'],
    ]);
    const out = execFileSync('sh', ['-c', `${text.replace(/\n/g, ';')} printf '%s|%s' "$A" "$B"`]).toString();
    assert.equal(out, "it's $HOME `x`|plain");
  });
});

describe('agent process tag', () => {
  it('runs the argv unchanged with the conversation tag as $0', () => {
    const { cmd, args } = taggedArgv('c0ffee', ['sh', '-c', 'printf "%s" "$0 $1"', 'first', 'second']);
    assert.equal(args[2], 'fountain-conv-c0ffee');
    assert.equal(execFileSync(cmd, args).toString(), 'first second');
  });
});

describe('KeyedLock', () => {
  it('serialises work per key and survives a failing task', async () => {
    const lock = new KeyedLock();
    const order: string[] = [];
    const slow = lock.run('k', async () => {
      await new Promise((r) => setTimeout(r, 20));
      order.push('slow');
    });
    const failing = lock.run('k', async () => {
      order.push('failing');
      throw new Error('boom');
    });
    const last = lock.run('k', async () => order.push('last'));
    await slow;
    await assert.rejects(failing, /boom/);
    await last;
    assert.deepEqual(order, ['slow', 'failing', 'last']);
  });
});

describe('real adapters', () => {
  it('an auth_required refusal names the credential the runtime reads; other errors pass through', () => {
    const auth = promptFailureReason('claude', {
      message: 'session/prompt failed: Authentication required (-32000)',
      rpc: { code: -32000 },
    });
    assert.match(
      auth,
      /^session\/prompt failed: Authentication required \(-32000\) — the claude agent's model credential \(claude_code_oauth_token or anthropic_api_key\) is missing or was refused/,
    );
    assert.match(auth, /\/account\/credentials/);
    assert.match(auth, /fountain credentials set/);
    assert.match(promptFailureReason('gemini', { message: 'x', rpc: { code: -32000 } }), /gemini_api_key/);
    assert.match(
      auth,
      /`fountain credentials set claude_code_oauth_token` or `fountain credentials set anthropic_api_key`/,
    );
    // opencode's credential is its model's vendor's.
    for (const [model, cred] of [
      ['openai/gpt-5', 'openai_api_key'],
      ['anthropic/claude-sonnet-4-5', 'anthropic_api_key'],
      ['google/gemini-2.5-pro', 'gemini_api_key'],
    ] as const) {
      const why = promptFailureReason(
        'opencode',
        { message: 'Incorrect API key provided', rpc: { code: -32603 } },
        model,
      );
      assert.match(why, new RegExp(`opencode agent's model credential \\(${cred}\\)`), why);
      assert.match(why, new RegExp(`\`fountain credentials set ${cred}\``), why);
    }
    assert.equal(
      promptFailureReason('claude', { message: 'session/prompt failed: boom (-32603)', rpc: { code: -32603 } }),
      'session/prompt failed: boom (-32603)',
    );
    // Refusals the runtimes report as generic errors (seen with Claude Code 2.1 and Gemini CLI 0.61).
    assert.match(
      promptFailureReason('claude', {
        message: 'session/prompt failed: Internal error: Invalid API key · Fix external API key (-32603)',
        rpc: { code: -32603 },
      }),
      /\/account\/credentials/,
    );
    assert.match(
      promptFailureReason('gemini', {
        message:
          'session/prompt failed: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key."}} (400)',
        rpc: { code: 400 },
      }),
      /gemini_api_key/,
    );
    assert.equal(
      promptFailureReason('claude', { message: 'the agent exited with code 1' }),
      'the agent exited with code 1',
    );
  });
  it("a refusal of the model gateway over a limit ends the turn with the gateway's sentence, whatever the runtime wrapped it in", () => {
    const sentence =
      "Fountain gateway: the agent's token budget tokens_per_conversation = 200 is spent (264 tokens used this conversation)";
    const body = (s: string) => JSON.stringify({ type: 'error', error: { type: 'permission_error', message: s } });
    // Claude Code and Gemini CLI fail the prompt with the vendor's body in their words.
    assert.equal(
      promptFailureReason('claude', {
        message: `session/prompt failed: API Error: 403 ${body(sentence)} (-32603)`,
        rpc: { code: -32603 },
      }),
      sentence,
    );
    assert.equal(
      promptFailureReason('gemini', {
        message: `[API Error: ${JSON.stringify(body(sentence))}]`,
        rpc: { code: -32000 },
      }),
      sentence,
    );
    for (const other of [
      "Fountain gateway: the account's budget usd_per_day = $5 is spent ($5.0012 used today (UTC))",
      "Fountain gateway: the agent's token budget tokens_per_conversation = 400 is nearly spent (300 tokens used this conversation, 1 call(s) in flight may use 125 more): retry once they end",
      "Fountain gateway: model claude-opus-4-1 is not on this agent's model allow-list (claude-haiku-4-5)",
      "Fountain gateway: the agent's limit requests_per_minute = 1 is reached (1 calls in the last minute)",
    ])
      assert.equal(promptFailureReason('opencode', { message: `Error: ${body(other)}` }, 'openai/gpt-5'), other);
    // codex-acp retries a 403 and then reports it in a session_info_update: the reason is the sentence, not a credential.
    const watch = new RefusalWatch();
    const info = (codex: unknown) => ({
      jsonrpc: '2.0',
      method: 'session/update',
      params: { sessionId: 's', update: { sessionUpdate: 'session_info_update', _meta: { codex } } },
    });
    watch.observe(
      info({
        error: {
          message: 'unexpected status 403 Forbidden',
          codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: 403 } },
          additionalDetails: `unexpected status 403 Forbidden: ${JSON.stringify({ error: { message: sentence, code: 'fountain_limit' } })}`,
        },
      }),
    );
    watch.observe(info({ threadStatus: { type: 'systemError' } }));
    assert.equal(watch.failure, sentence);
    // A gateway answer that is about the key stays a credential problem.
    assert.match(
      promptFailureReason('claude', {
        message: 'API Error: 401 Fountain gateway: the key is not a live sandbox token (unknown, revoked or expired)',
        rpc: { code: -32000 },
      }),
      /model credential/,
    );
  });
  it('every runtime lives inside the sandbox: HOME, cwd, workspace and instructions under /home/sprite, never the shared /tmp', () => {
    for (const spec of Object.values(RUNTIME_SPECS)) {
      for (const path of [spec.home, spec.cwd, spec.instructionsFile, spec.workspace ?? spec.home])
        assert.ok(path === SANDBOX_HOME || path.startsWith(`${SANDBOX_HOME}/`), `${spec.id}: ${path}`);
    }
  });
  it('claude runs with IS_SANDBOX=1 (Claude Code refuses bypass mode as root otherwise); no runtime env carries a credential', () => {
    assert.deepEqual(RUNTIME_SPECS.claude.env[0], ['IS_SANDBOX', '1']);
    for (const spec of Object.values(RUNTIME_SPECS))
      for (const [k] of spec.env) assert.doesNotMatch(k, /KEY|TOKEN|SECRET/);
  });
});

describe('platform MCP servers for a session', () => {
  const team = { id: '0b7c2f4e-1111-4222-8333-444455556666', channelId: 'fountain:team' };
  const token = `ftn_${'a'.repeat(64)}`;
  it('a team conversation of an http-capable agent gets the team MCP with the bearer token', () => {
    assert.deepEqual(platformMcpServers(team, 'http://127.0.0.1:4000', token, { mcpCapabilities: { http: true } }), [
      {
        type: 'http',
        name: 'fountain-team',
        url: `http://127.0.0.1:4000/api/mcp/team/${team.id}`,
        headers: [{ name: 'Authorization', value: `Bearer ${token}` }],
      },
    ]);
  });
  it('a stdio-only agent, a conversation off the team channel, or an unknown base URL gets none', () => {
    assert.deepEqual(platformMcpServers(team, 'http://127.0.0.1:4000', token, { mcpCapabilities: { sse: true } }), []);
    assert.deepEqual(platformMcpServers(team, 'http://127.0.0.1:4000', token, {}), []);
    assert.deepEqual(platformMcpServers(team, 'http://127.0.0.1:4000', token, undefined), []);
    assert.deepEqual(
      platformMcpServers({ ...team, channelId: null }, 'http://127.0.0.1:4000', token, {
        mcpCapabilities: { http: true },
      }),
      [],
    );
    assert.deepEqual(platformMcpServers(team, null, token, { mcpCapabilities: { http: true } }), []);
  });
});

describe('silence', () => {
  it('says the agent was silent; blames the credential only when its stderr reports an auth failure', () => {
    const plain = silenceReason(601_000, 'loading settings from /home/sprite/.config\n');
    assert.match(plain, /sent nothing for 601 s with no tool call running/);
    assert.doesNotMatch(plain, /credential/);
    const auth = silenceReason(
      601_000,
      'API Error: 401 {"type":"error","error":{"type":"authentication_error"}}\nretrying in 30s',
    );
    assert.match(auth, /authentication failure: check the runtime's model credential/);
    assert.match(auth, /401/);
  });
});

describe('the model option an adapter offers', () => {
  const option = (currentValue: string, values: string[]) =>
    [
      {
        id: 'model',
        name: 'Model',
        category: 'model',
        type: 'select',
        currentValue,
        options: values.map((value) => ({ value, name: value })),
      },
    ] as unknown as Parameters<typeof modelOptionToSet>[0];
  it('is set only to an exact listing of the agent model, and only when another is current', () => {
    assert.equal(
      modelOptionToSet(
        option('default', ['default', 'claude-sonnet-4-5']),
        'anthropic/claude-sonnet-4-5',
        'claude-sonnet-4-5',
      ),
      'claude-sonnet-4-5',
    );
    assert.equal(
      modelOptionToSet(
        option('claude-sonnet-4-5', ['default', 'claude-sonnet-4-5']),
        'anthropic/claude-sonnet-4-5',
        'claude-sonnet-4-5',
      ),
      null,
    );
    // An alias would let the runtime choose its own model id: left to the env (ANTHROPIC_MODEL).
    assert.equal(
      modelOptionToSet(
        option('default', ['default', 'sonnet', 'opus[1m]']),
        'anthropic/claude-sonnet-4-5',
        'claude-sonnet-4-5',
      ),
      null,
    );
    assert.equal(modelOptionToSet(option('x', ['openai/gpt-5', 'x']), 'openai/gpt-5', 'gpt-5'), 'openai/gpt-5');
    assert.equal(modelOptionToSet(undefined, 'openai/gpt-5', 'gpt-5'), null);
  });
});
