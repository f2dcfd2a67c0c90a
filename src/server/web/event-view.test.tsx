import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventRow } from '../store/conversation-schema.ts';
import { AgentText, EventReader, interpret, ItemView, permissionOutcome } from './event-view.tsx';
import { toHtml } from './live.ts';

let n = 0;
const row = (over: Partial<EventRow>): EventRow => ({
  id: ++n,
  conversationId: 'c',
  turnId: 't',
  kind: 'output',
  stream: 'acp',
  data: '',
  stage: null,
  state: null,
  durationMs: null,
  seq: null,
  ts: new Date(),
  ...over,
});
const acp = (update: Record<string, unknown>) =>
  row({ data: JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update } }) });

describe('conversation events as items', () => {
  it('maps ACP updates: text and thoughts; drops the rest', () => {
    assert.deepEqual(interpret(acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hi ' } })), {
      kind: 'text',
      text: 'Hi ',
      turnId: 't',
    });
    assert.deepEqual(interpret(acp({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } })), {
      kind: 'thought',
      text: 'hmm',
    });
    // Tool lines need an EventReader, which merges them: read alone they are nothing.
    assert.equal(
      interpret(
        acp({
          sessionUpdate: 'tool_call',
          toolCallId: 'x',
          title: 'Run `ls`',
          kind: 'execute',
          status: 'pending',
          rawInput: { command: 'ls' },
        }),
      ),
      null,
    );
    assert.equal(interpret(acp({ sessionUpdate: 'plan', entries: [] })), null);
    assert.equal(interpret(row({ data: 'not json' })), null);
    assert.deepEqual(interpret(row({ stream: 'stderr', data: 'oops' })), {
      kind: 'output',
      stream: 'stderr',
      text: 'oops',
    });
  });

  it("merges every tool update into its call, as Claude sends them: the card shows the command, its output and an edit's diff", async () => {
    const reader = new EventReader();
    const first = reader.read(
      acp({
        sessionUpdate: 'tool_call',
        toolCallId: 'toolu_1',
        title: 'Terminal',
        kind: 'execute',
        status: 'pending',
        rawInput: {},
        _meta: { claudeCode: { toolName: 'Bash' } },
      }),
    );
    assert.ok(first?.kind === 'tool' && first.first);
    const titled = reader.read(
      acp({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'toolu_1',
        title: 'ls -la',
        rawInput: { command: 'ls -la' },
      }),
    );
    assert.ok(titled?.kind === 'tool' && !titled.first && titled.view.title === 'ls -la');
    const done = reader.read(
      acp({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'toolu_1',
        status: 'completed',
        content: [{ type: 'content', content: { type: 'text', text: 'a.ts\n<b>.ts' } }],
      }),
    );
    assert.ok(done?.kind === 'tool');
    const html = await toHtml(<ItemView item={done} conversationId="c" />);
    assert.match(
      html,
      /<span class="tool-kind">Run<\/span> <span class="tool-title">ls -la<\/span> <span class="badge tool-completed" data-status="completed">done<\/span>/,
    );
    assert.match(html, /<span class="muted small"> Bash<\/span>/);
    assert.match(html, /<pre class="cmd">\$ ls -la<\/pre>/);
    assert.match(html, /a\.ts\n&lt;b&gt;\.ts/, 'agent output is escaped');
    assert.ok(first?.kind === 'tool' && done.key === first.key, 'every update lands on the same card');
    reader.read(
      acp({
        sessionUpdate: 'tool_call',
        toolCallId: 'toolu_2',
        title: 'Edit',
        kind: 'edit',
        status: 'pending',
        _meta: { claudeCode: { toolName: 'Edit' } },
      }),
    );
    const edit = reader.read(
      acp({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'toolu_2',
        title: 'Edit a.txt',
        content: [{ type: 'diff', path: '/w/a.txt', oldText: 'red\n', newText: 'green\n' }],
      }),
    );
    assert.ok(edit?.kind === 'tool');
    const diff = await toHtml(<ItemView item={edit} conversationId="c" />);
    assert.match(diff, /<span class="del">-red<\/span>\n<span class="add">\+green<\/span>/);
  });

  it('maps stage events: permission requests with options, turns, failures', () => {
    const perm = interpret(
      row({
        kind: 'stage',
        stream: '',
        stage: 'permission',
        state: 'started',
        data: JSON.stringify({
          request_id: '3.ab',
          tool: 'Run',
          options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }],
        }),
      }),
    );
    assert.deepEqual(perm, {
      kind: 'permission',
      requestId: '3.ab',
      tool: 'Run',
      options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }],
    });
    assert.deepEqual(
      interpret(row({ kind: 'stage', stream: '', stage: 'turn', state: 'failed', data: '{"reason":"peer_down"}' })),
      { kind: 'turn', state: 'failed', turnId: 't', text: 'This turn failed: the agent stopped unexpectedly' },
    );
    assert.deepEqual(
      interpret(row({ kind: 'stage', stream: '', stage: 'provision', state: 'failed', data: '{"reason":"no disk"}' })),
      { kind: 'stage', stage: 'provision', state: 'failed', text: 'Could not start a computer: no disk', failed: true },
    );
  });

  it('renders agent-controlled text escaped, and permission options as buttons', async () => {
    const html = await toHtml(
      <ItemView item={{ kind: 'text', text: '<img src=x onerror=alert(1)>', turnId: null }} conversationId="c" />,
    );
    assert.equal(html, '<span class="chunk">&lt;img src=x onerror=alert(1)&gt;</span>');
    const form = await toHtml(
      <ItemView
        item={{
          kind: 'permission',
          requestId: '3.ab',
          tool: 'Run `rm`',
          options: [
            { option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' },
            { option_id: 'reject_once', name: 'Reject', kind: 'reject_once' },
          ],
        }}
        conversationId="c"
      />,
    );
    assert.match(form, /hx-post="\/conversations\/c\/requests\/3.ab"/);
    assert.match(form, /<button type="submit" name="option_id" value="allow_once" class="">Allow once<\/button>/);
    assert.match(form, /value="reject_once" class="danger">Reject</);
  });

  it('says how a permission request ended, with the option names the request offered', () => {
    const options = [
      { option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' },
      { option_id: 'reject_once', name: 'Reject', kind: 'reject_once' },
    ];
    const done = (outcome: string, optionId: string | null, tool: string | null = null) => ({
      kind: 'permission_done' as const,
      requestId: 'r',
      tool,
      outcome,
      optionId,
    });
    assert.equal(permissionOutcome(done('answered', 'allow_once'), options), 'Answered: Allow once');
    assert.equal(
      permissionOutcome(done('answered', 'allow_once'), undefined),
      'Answered: allow_once',
      'the id when the request is not known',
    );
    assert.equal(
      permissionOutcome(done('timeout', 'reject_once'), options),
      'No answer in time; the agent was told: Reject',
    );
    assert.equal(
      permissionOutcome(done('cancelled', null), options),
      'The request was withdrawn when the turn was interrupted',
    );
    assert.equal(
      permissionOutcome(done('auto_allow', 'allow_once', 'Run `ls`'), undefined),
      'Run `ls`: allowed by the permission policy',
    );
    const parsed = interpret(
      row({
        kind: 'stage',
        stream: '',
        stage: 'permission',
        state: 'done',
        data: JSON.stringify({ request_id: 'r', tool: 'Run', outcome: 'auto_deny', option_id: 'reject_once' }),
      }),
    );
    assert.deepEqual(parsed, {
      kind: 'permission_done',
      requestId: 'r',
      tool: 'Run',
      outcome: 'auto_deny',
      optionId: 'reject_once',
    });
  });

  it('says lifecycle events and exit codes in words', () => {
    const stage = (stage: string, state: EventRow['state'], data: unknown) =>
      interpret(row({ kind: 'stage', stream: '', stage, state, data: JSON.stringify(data) })) as { text: string };
    assert.equal(
      stage('provision', 'started', { provider: 'runner', name: 'runner-x' }).text,
      'Starting a computer for the agent…',
    );
    assert.equal(stage('turn', 'done', { stop_reason: 'end_turn' }).text, 'Done');
    assert.equal(
      stage('turn', 'failed', { reason: 'the agent exited with code 143' }).text,
      'This turn failed: the agent was stopped (exit status 143)',
    );
    assert.equal(
      stage('sandbox', 'done', { event: 'suspended', reason: 'idle' }).text,
      'Computer put to sleep because it was idle; the next message wakes it',
    );
    for (const t of [
      stage('provision', 'done', {}).text,
      stage('terminate', 'done', {}).text,
      stage('turn', 'done', { stop_reason: 'max_tokens' }).text,
    ]) {
      assert.doesNotMatch(t, /provision|sprite|stop reason|sandbox/i);
    }
  });

  it('shows a tool call as a card: the command, readable input, folded output, a coloured diff', async () => {
    const reader = new EventReader();
    const call = reader.read(
      acp({
        sessionUpdate: 'tool_call',
        toolCallId: 'e',
        title: 'Edit a.txt',
        kind: 'edit',
        status: 'pending',
        rawInput: { path: '/w/a.txt', replace_all: false },
      }),
    )!;
    const card = await toHtml(<ItemView item={call} conversationId="c" />);
    assert.match(card, /<details id="tool-t_e" class="ev tool"/);
    assert.match(card, /path: \/w\/a.txt\nreplace_all: false/);
    assert.doesNotMatch(card, /\{"path"/);
    const long = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n');
    const out = reader.read(
      acp({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'e',
        status: 'completed',
        content: [
          { type: 'content', content: { type: 'text', text: long } },
          { type: 'diff', path: '/w/a.txt', oldText: 'one\ntwo\n', newText: 'one\n2\n' },
          { type: 'terminal', terminalId: 'term-1' },
        ],
      }),
    )!;
    const html = await toHtml(<ItemView item={out} conversationId="c" />);
    assert.match(html, /line 12<\/pre><details><summary>Show 18 more lines<\/summary><pre class="out">line 13/);
    assert.match(html, /<span class="del">-two<\/span>/);
    assert.match(html, /<span class="add">\+2<\/span>/);
    assert.match(html, /Ran in a terminal \(term-1\)/);
    assert.match(html, /path: \/w\/a.txt\nreplace_all: false/, 'the merged card keeps the input the call began with');
  });

  it('renders a finished answer as sanitised Markdown', async () => {
    const html = await toHtml(<AgentText text={'**hi** <script>x</script>\n\n```sh\nls\n```'} />);
    assert.match(html, /<strong>hi<\/strong> &lt;script&gt;/);
    assert.match(html, /<code class="hljs language-sh">/);
  });

  it('renders Markdown nested in a page, as the conversation page lists its blocks', async () => {
    const html = await toHtml(
      <section>{[<AgentText text="one **a**" />, <p>between</p>, <AgentText text="two *b*" />]}</section>,
    );
    assert.match(
      html,
      /^<section><div class="ev text md"><p>one <strong>a<\/strong><\/p>\n<\/div><p>between<\/p><div class="ev text md"><p>two <em>b<\/em><\/p>\n<\/div><\/section>$/,
    );
  });
});
