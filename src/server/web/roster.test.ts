import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConversationView, SandboxView } from '../conversations/views.ts';
import type { Turn } from '../store/conversation-schema.ts';
import { currentConversation, presenceOf, previewOf, whereOf } from './roster.ts';

const sandbox = (over: Partial<SandboxView>): SandboxView => ({
  id: 's',
  provider: 'runner',
  name: 'n',
  sprite_name: 'n',
  status: 'ready',
  url: null,
  runner: null,
  ...over,
});
const conv = (status: string, s: SandboxView | null, id = status): ConversationView =>
  ({ id, status, sandbox: s, last_active_at: '2026-01-01T00:00:00Z' }) as unknown as ConversationView;
const runner = (online: boolean) => ({ id: 'r', name: 'mac-mini', hostname: 'h', online, path: '/srv/sb/runner-x' });

describe('presence (first matching row wins)', () => {
  const cases: Array<[ConversationView | null, string, string]> = [
    [conv('running', sandbox({ runner: runner(false) })), 'working', 'working'],
    [conv('pending', sandbox({ status: 'ready' })), 'online', 'ready · waiting for a turn'],
    [conv('pending', sandbox({ status: 'starting' })), 'starting', 'starting computer'],
    [
      conv('idle', sandbox({ runner: runner(false) })),
      'machine_offline',
      'machine offline · wakes when the runner reconnects',
    ],
    [conv('idle', sandbox({ runner: runner(true) })), 'online', 'online'],
    [conv('idle', sandbox({ provider: 'daytona', status: 'suspended' })), 'asleep', 'asleep · wakes on message'],
    [conv('idle', sandbox({ provider: 'daytona', status: 'terminated' })), 'away', 'away · wakes on message'],
    [conv('idle', null), 'away', 'away · wakes on message'],
    [conv('failed', null), 'failed', 'stopped after an error · a message starts afresh'],
    [conv('terminated', null), 'offline', 'ended · a message starts a new conversation'],
    [null, 'offline', 'not started · a message starts it'],
  ];
  for (const [c, state, label] of cases) {
    it(`${c?.status ?? 'no conversation'} / ${c?.sandbox?.status ?? '-'} → ${state}`, () =>
      assert.deepEqual(presenceOf(c), { state, label }));
  }

  it('says where a teammate runs', () => {
    assert.equal(whereOf(conv('idle', sandbox({ runner: runner(true) }))), 'on mac-mini', 'no host path in page text');
    assert.equal(whereOf(conv('idle', sandbox({ provider: 'sprites' }))), 'on sprites');
    assert.equal(whereOf(null), null);
  });

  it('messages go to the newest live conversation, else the newest', () => {
    assert.equal(currentConversation([conv('terminated', null, 'a'), conv('idle', null, 'b')])?.id, 'b');
    assert.equal(currentConversation([conv('failed', null, 'a'), conv('terminated', null, 'b')])?.id, 'a');
    assert.equal(currentConversation([]), null);
  });
});

describe('team card preview', () => {
  const turn = (status: string, over: Partial<Turn> = {}): Turn =>
    ({ status, prompt: 'hello', pendingPermission: null, ...over }) as unknown as Turn;
  const asked = {
    request_id: 'r',
    acp_id: 1,
    tool: 'Run `ls`',
    kind: 'execute',
    options: [],
    asked_at: '2026-01-01T00:00:00Z',
  };

  it('shows the reply as it streams, a waiting permission, or the prompt of a turn without a reply', () => {
    assert.equal(previewOf(null, ''), null);
    assert.deepEqual(previewOf(turn('running'), ''), { kind: 'typing', text: '' });
    assert.deepEqual(previewOf(turn('running'), 'You said: he'), { kind: 'them', text: 'You said: he' });
    assert.deepEqual(previewOf(turn('running', { pendingPermission: asked }), 'partial'), {
      kind: 'asking',
      text: 'Run `ls`',
    });
    assert.deepEqual(previewOf(turn('completed'), '  answer\n'), { kind: 'them', text: 'answer' });
    assert.deepEqual(previewOf(turn('failed'), ''), { kind: 'you', text: 'hello' });
  });

  it('clips a long reply; the whole of it is in the conversation', () => {
    const v = previewOf(turn('completed'), 'x'.repeat(500));
    assert.equal(v?.text.length, 200);
    assert.ok(v?.text.endsWith('…'));
  });
});
