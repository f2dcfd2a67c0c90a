import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { diffLines } from '../../acp/diff-lines.ts';
import { ToolFold } from '../../acp/tool-view.ts';
import type { EventRow } from '../store/conversation-schema.ts';
import { BlockDeriver, type Block } from './blocks.ts';

let nextId = 1;
const update = (u: Record<string, unknown>, turnId = 't1'): EventRow =>
  row(JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update: u } }), turnId);
const request = (toolCall: Record<string, unknown>, turnId = 't1'): EventRow =>
  row(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'session/request_permission',
      params: { sessionId: 's', toolCall, options: [] },
    }),
    turnId,
  );
function row(data: string, turnId: string): EventRow {
  return {
    id: nextId++,
    conversationId: 'c',
    turnId,
    kind: 'output',
    stream: 'acp',
    data,
    stage: null,
    state: null,
    durationMs: null,
    seq: null,
    ts: new Date(),
  };
}
const run = (rows: EventRow[]): Block[][] => {
  const d = new BlockDeriver();
  return rows.map((r) => d.blocks(r));
};
const toolOf = (b: Block[]) => {
  const t = b[0];
  assert.ok(t && 'tool' in t, JSON.stringify(b));
  return t.tool;
};

// Message shapes as claude-agent-acp sends them over ACP v1 (the adapter's recorded scenarios).
const claudeBash = [
  update({
    _meta: { claudeCode: { toolName: 'Bash' } },
    content: [],
    kind: 'execute',
    rawInput: {},
    sessionUpdate: 'tool_call',
    status: 'pending',
    title: 'Terminal',
    toolCallId: 'toolu_bash',
  }),
  update({ sessionUpdate: 'tool_call_update', title: 'ls -la', toolCallId: 'toolu_bash' }),
  update({ _meta: { _claude: { model: 'x' } }, sessionUpdate: 'usage_update', size: 200000, used: 3 }),
  update({
    rawInput: { command: 'ls -la', description: 'List files' },
    sessionUpdate: 'tool_call_update',
    toolCallId: 'toolu_bash',
  }),
  request({ rawInput: { command: 'ls -la', description: 'List files' }, title: 'ls -la', toolCallId: 'toolu_bash' }),
  update({
    sessionUpdate: 'tool_call_update',
    status: 'completed',
    toolCallId: 'toolu_bash',
    content: [{ type: 'content', content: { type: 'text', text: '```console\na.ts\nb.ts\n```' } }],
  }),
];

const claudeEdit = [
  update({
    _meta: { claudeCode: { toolName: 'Edit' } },
    content: [],
    kind: 'edit',
    locations: [],
    sessionUpdate: 'tool_call',
    status: 'pending',
    title: 'Edit',
    toolCallId: 'toolu_edit',
  }),
  update({
    locations: [{ path: '/w/src/app.ts' }],
    sessionUpdate: 'tool_call_update',
    title: 'Edit src/app.ts',
    toolCallId: 'toolu_edit',
  }),
  update({
    content: [{ newText: 'const value = 2;', oldText: 'const value = 1;', path: '/w/src/app.ts', type: 'diff' }],
    rawInput: { file_path: '/w/src/app.ts' },
    sessionUpdate: 'tool_call_update',
    toolCallId: 'toolu_edit',
  }),
  update({
    rawOutput: 'The file /w/src/app.ts has been updated successfully.',
    sessionUpdate: 'tool_call_update',
    status: 'completed',
    toolCallId: 'toolu_edit',
  }),
  update({
    content: [
      {
        newText: 'line 1\nconst value = 2;\nline 3',
        oldText: 'line 1\nconst value = 1;\nline 3',
        path: '/w/src/app.ts',
        type: 'diff',
      },
    ],
    locations: [{ line: 1, path: '/w/src/app.ts' }],
    sessionUpdate: 'tool_call_update',
    toolCallId: 'toolu_edit',
  }),
];

describe('tool calls shown as they are', () => {
  it("Claude's Bash: the empty first call grows its command, and its output ends it", () => {
    const b = run(claudeBash);
    assert.equal(b[0]![0]!.kind, 'tool_use');
    assert.deepEqual(
      [toolOf(b[0]!).title, toolOf(b[0]!).tool_name, toolOf(b[0]!).kind, toolOf(b[0]!).raw_input],
      ['Terminal', 'Bash', 'execute', {}],
    );
    assert.equal(b[1]![0]!.kind, 'tool_update');
    assert.equal(toolOf(b[1]!).title, 'ls -la');
    assert.deepEqual(b[2], [], 'usage is not a block');
    assert.deepEqual(toolOf(b[3]!).raw_input, { command: 'ls -la', description: 'List files' });
    assert.equal(b[3]![0]!.kind === 'tool_update' && b[3]![0]!.summary, 'ls -la');
    // The permission request restates the call without its status: the call is still pending.
    assert.equal(toolOf(b[4]!).status, 'pending');
    const end = b[5]![0]!;
    assert.ok(end.kind === 'tool_result');
    assert.deepEqual([end.tool_id, end.error, end.body], ['toolu_bash', false, '```console\na.ts\nb.ts\n```']);
    assert.deepEqual([end.tool.title, end.tool.tool_name, end.tool.kind], ['ls -la', 'Bash', 'execute']);
  });

  it("Claude's Edit: the diff arrives in updates and stays after the call completes", () => {
    const b = run(claudeEdit);
    const v = toolOf(b[4]!);
    assert.deepEqual(
      [v.title, v.tool_name, v.status, v.raw_output],
      ['Edit src/app.ts', 'Edit', 'completed', 'The file /w/src/app.ts has been updated successfully.'],
    );
    assert.deepEqual(v.locations, [{ path: '/w/src/app.ts', line: 1 }]);
    const d = v.content[0]!;
    assert.ok(d.type === 'diff');
    assert.deepEqual(
      diffLines(d).map((l) => `${l.type}:${l.text}`),
      ['hunk:@@ -1,3 +1,3 @@', 'context: line 1', 'del:-const value = 1;', 'add:+const value = 2;', 'context: line 3'],
    );
    const result = b[3]![0]!;
    assert.ok(result.kind === 'tool_result' && result.body === 'The file /w/src/app.ts has been updated successfully.');
    // A new file has no old text: all additions.
    assert.deepEqual(
      diffLines({ type: 'diff', path: 'n.txt', old_text: null, new_text: 'a\nb\n' }).map((l) => l.type),
      ['hunk', 'add', 'add'],
    );
  });

  it('gemini: a call seen only in its permission request, then completed with empty content', () => {
    const b = run([
      request({
        toolCallId: 'run_shell_command-1',
        title: 'echo hi',
        kind: 'execute',
        status: 'pending',
        rawInput: { command: 'echo hi', description: 'say hi' },
        content: [],
      }),
      update({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'run_shell_command-1',
        status: 'completed',
        content: [],
      }),
    ]);
    assert.equal(b[0]![0]!.kind, 'tool_use');
    const end = b[1]![0]!;
    assert.ok(end.kind === 'tool_result');
    assert.deepEqual([end.tool.title, end.body, end.error], ['echo hi', '', false]);
  });

  it('opencode: output in content and rawOutput; a terminal piece is kept as a terminal', () => {
    const b = run([
      update({
        sessionUpdate: 'tool_call',
        toolCallId: 'call_1',
        title: 'bash',
        kind: 'execute',
        status: 'pending',
        rawInput: {},
      }),
      update({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'call_1',
        status: 'in_progress',
        rawInput: { command: 'pwd', description: 'where' },
        title: 'pwd',
      }),
      update({
        sessionUpdate: 'tool_call_update',
        toolCallId: 'call_1',
        status: 'failed',
        rawOutput: { output: 'boom', metadata: { exit: 1 } },
        content: [{ type: 'terminal', terminalId: 'term-1' }],
      }),
    ]);
    const end = b[2]![0]!;
    assert.ok(end.kind === 'tool_result');
    assert.deepEqual(
      [end.error, end.body, end.tool.content],
      [true, 'boom', [{ type: 'terminal', terminal_id: 'term-1' }]],
    );
  });

  it('keeps calls of different turns apart, text and thoughts as such, and reads junk as nothing', () => {
    const d = new BlockDeriver();
    assert.equal(
      d.blocks(update({ sessionUpdate: 'tool_call', toolCallId: 'x', title: 'One', status: 'completed' }, 'a'))[0]!
        .kind,
      'tool_use',
    );
    assert.equal(
      d.blocks(update({ sessionUpdate: 'tool_call', toolCallId: 'x', title: 'Two' }, 'b'))[0]!.kind,
      'tool_use',
    );
    assert.deepEqual(
      d.blocks(update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'hi' } })),
      [{ kind: 'text', body: 'hi' }],
    );
    assert.deepEqual(
      d.blocks(update({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hm' } })),
      [{ kind: 'thinking', body: 'hm' }],
    );
    assert.deepEqual(d.blocks(row('not json', 't')), []);
    assert.deepEqual(d.blocks(update({ sessionUpdate: 'tool_call_update', title: 'no id' })), []);
    assert.deepEqual(d.blocks({ ...row('out', 't'), stream: 'stdout' }), [
      { kind: 'raw', body: 'out', summary: 'stdout' },
    ]);
    assert.deepEqual(d.blocks({ ...row('{}', 't'), kind: 'stage', stream: '' }), []);
  });

  it('a running call is known as running until an update ends it', () => {
    const f = new ToolFold();
    f.applyLine(claudeBash[0]!.data);
    assert.equal(f.anyRunning(), true);
    f.applyLine(claudeBash[5]!.data);
    assert.equal(f.anyRunning(), false);
  });
});
