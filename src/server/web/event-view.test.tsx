import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventRow } from '../store/conversation-schema.ts';
import { EventReader, interpret, ItemView, permissionOutcome } from './event-view.tsx';
import { toHtml } from './live.ts';

let n = 0;
const row = (over: Partial<EventRow>): EventRow => ({ id: ++n, conversationId: 'c', turnId: 't', kind: 'output', stream: 'acp', data: '', stage: null, state: null, durationMs: null, seq: null, ts: new Date(), ...over });
const acp = (update: Record<string, unknown>) => row({ data: JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update } }) });

describe('conversation events as items', () => {
  it('maps ACP updates: text and thoughts; drops the rest', () => {
    assert.deepEqual(interpret(acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hi ' } })), { kind: 'text', text: 'Hi ', turnId: 't' });
    assert.deepEqual(interpret(acp({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } })), { kind: 'thought', text: 'hmm' });
    assert.equal(interpret(acp({ sessionUpdate: 'plan', entries: [] })), null);
    assert.equal(interpret(row({ data: 'not json' })), null);
    assert.deepEqual(interpret(row({ stream: 'stderr', data: 'oops' })), { kind: 'output', stream: 'stderr', text: 'oops' });
  });

  it("merges every tool update into its call, as Claude sends them: the card shows the command, its output and an edit's diff", async () => {
    const reader = new EventReader();
    const first = reader.read(acp({ sessionUpdate: 'tool_call', toolCallId: 'toolu_1', title: 'Terminal', kind: 'execute', status: 'pending', rawInput: {}, _meta: { claudeCode: { toolName: 'Bash' } } }));
    assert.ok(first?.kind === 'tool' && first.first);
    const titled = reader.read(acp({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', title: 'ls -la', rawInput: { command: 'ls -la' } }));
    assert.ok(titled?.kind === 'tool' && !titled.first && titled.view.title === 'ls -la');
    const done = reader.read(acp({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'a.ts\n<b>.ts' } }] }));
    assert.ok(done?.kind === 'tool');
    const html = await toHtml(<ItemView item={done} conversationId="c" />);
    assert.match(html, /<strong>ls -la<\/strong> <span class="badge">completed<\/span>/);
    assert.match(html, /Bash · execute/);
    assert.match(html, /a\.ts\n&lt;b&gt;\.ts/, 'agent output is escaped');
    reader.read(acp({ sessionUpdate: 'tool_call', toolCallId: 'toolu_2', title: 'Edit', kind: 'edit', status: 'pending', _meta: { claudeCode: { toolName: 'Edit' } } }));
    const edit = reader.read(acp({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_2', title: 'Edit a.txt', content: [{ type: 'diff', path: '/w/a.txt', oldText: 'red\n', newText: 'green\n' }] }));
    assert.ok(edit?.kind === 'tool');
    const diff = await toHtml(<ItemView item={edit} conversationId="c" />);
    assert.match(diff, /<span class="diff-del">-red\n<\/span><span class="diff-add">\+green\n<\/span>/);
  });

  it('maps stage events: permission requests with options, turns, failures', () => {
    const perm = interpret(row({ kind: 'stage', stream: '', stage: 'permission', state: 'started', data: JSON.stringify({ request_id: '3.ab', tool: 'Run', options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }] }) }));
    assert.deepEqual(perm, { kind: 'permission', requestId: '3.ab', tool: 'Run', options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }] });
    assert.deepEqual(interpret(row({ kind: 'stage', stream: '', stage: 'turn', state: 'failed', data: '{"reason":"peer_down"}' })), { kind: 'turn', state: 'failed', turnId: 't', detail: 'reason: peer_down' });
    assert.deepEqual(interpret(row({ kind: 'stage', stream: '', stage: 'provision', state: 'failed', data: '{"reason":"no disk"}' })), { kind: 'stage', stage: 'provision', state: 'failed', detail: 'reason: no disk', failed: true });
  });

  it('renders agent-controlled text escaped, and permission options as buttons', async () => {
    const html = await toHtml(<ItemView item={{ kind: 'text', text: '<img src=x onerror=alert(1)>', turnId: null }} conversationId="c" />);
    assert.equal(html, '<span class="chunk">&lt;img src=x onerror=alert(1)&gt;</span>');
    const form = await toHtml(<ItemView item={{ kind: 'permission', requestId: '3.ab', tool: 'Run `rm`', options: [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }, { option_id: 'reject_once', name: 'Reject', kind: 'reject_once' }] }} conversationId="c" />);
    assert.match(form, /hx-post="\/conversations\/c\/requests\/3.ab"/);
    assert.match(form, /<button type="submit" name="option_id" value="allow_once" class="">Allow once<\/button>/);
    assert.match(form, /value="reject_once" class="danger">Reject</);
  });

  it('says how a permission request ended, with the option names the request offered', () => {
    const options = [{ option_id: 'allow_once', name: 'Allow once', kind: 'allow_once' }, { option_id: 'reject_once', name: 'Reject', kind: 'reject_once' }];
    const done = (outcome: string, optionId: string | null, tool: string | null = null) => ({ kind: 'permission_done' as const, requestId: 'r', tool, outcome, optionId });
    assert.equal(permissionOutcome(done('answered', 'allow_once'), options), 'Answered: Allow once');
    assert.equal(permissionOutcome(done('answered', 'allow_once'), undefined), 'Answered: allow_once', 'the id when the request is not known');
    assert.equal(permissionOutcome(done('timeout', 'reject_once'), options), 'No answer in time; the agent was told: Reject');
    assert.equal(permissionOutcome(done('cancelled', null), options), 'The request was withdrawn when the turn was interrupted');
    assert.equal(permissionOutcome(done('auto_allow', 'allow_once', 'Run `ls`'), undefined), 'Run `ls`: allowed by the permission policy');
    const parsed = interpret(row({ kind: 'stage', stream: '', stage: 'permission', state: 'done', data: JSON.stringify({ request_id: 'r', tool: 'Run', outcome: 'auto_deny', option_id: 'reject_once' }) }));
    assert.deepEqual(parsed, { kind: 'permission_done', requestId: 'r', tool: 'Run', outcome: 'auto_deny', optionId: 'reject_once' });
  });
});
