import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { allowOutcome, denyOutcome, verdictFor } from './policy.ts';
import type { PermissionPolicy } from '../store/conversation-schema.ts';

const options = [
  { optionId: 'a2', name: 'Always', kind: 'allow_always' as const },
  { optionId: 'a1', name: 'Allow', kind: 'allow_once' as const },
  { optionId: 'r1', name: 'Reject', kind: 'reject_once' as const },
];

describe('permission policy', () => {
  it('looks up the tool name, then the title, then the kind, then default, then auto_allow', () => {
    const p: PermissionPolicy = { Bash: 'auto_deny', 'Run `ls`': 'ask', execute: 'auto_allow', default: 'ask' };
    assert.equal(verdictFor(p, { toolName: 'Bash', title: 'Run `ls`', kind: 'execute' }), 'auto_deny');
    assert.equal(verdictFor(p, { toolName: 'Edit', title: 'Run `ls`', kind: 'execute' }), 'ask');
    assert.equal(verdictFor(p, { title: 'Run `pwd`', kind: 'execute' }), 'auto_allow');
    assert.equal(verdictFor(p, { title: 'Read', kind: 'read' }), 'ask');
    assert.equal(verdictFor({}, { title: 'Read', kind: 'read' }), 'auto_allow');
  });

  it('reads own keys only: no name on Object.prototype is a rule (issue 22 #5)', () => {
    const names = Object.getOwnPropertyNames(Object.prototype);
    assert.ok(names.includes('constructor') && names.includes('toString') && names.includes('__proto__'));
    for (const name of names) {
      for (const tool of [{ toolName: name }, { title: name }, { kind: name }]) {
        assert.equal(verdictFor({ default: 'ask' }, tool), 'ask', `${name} as ${Object.keys(tool)[0]}`);
        assert.equal(verdictFor({ default: 'auto_deny' }, tool), 'auto_deny', `${name} as ${Object.keys(tool)[0]}`);
      }
      // A policy with no default: still never a function or a prototype value.
      assert.equal(verdictFor({}, { toolName: name, title: name, kind: 'execute' }), 'auto_allow', name);
    }
  });

  it('treats a verdict outside the closed set as ask', () => {
    const stored = JSON.parse('{"execute": "yes please", "default": "maybe"}') as PermissionPolicy;
    assert.equal(verdictFor(stored, { kind: 'execute' }), 'ask');
    assert.equal(verdictFor(stored, { kind: 'read' }), 'ask');
  });

  it('an automatic allow answers allow_once, never allow_always; without allow_once it answers nothing', () => {
    assert.deepEqual(allowOutcome(options), { outcome: 'selected', optionId: 'a1' });
    assert.equal(allowOutcome(options.filter((o) => o.kind !== 'allow_once')), null);
    assert.equal(allowOutcome([]), null);
  });

  it('deny picks a reject option or cancels, never inventing an id', () => {
    assert.deepEqual(denyOutcome(options), { outcome: 'selected', optionId: 'r1' });
    assert.deepEqual(denyOutcome(options.slice(0, 2)), { outcome: 'cancelled' });
  });
});
