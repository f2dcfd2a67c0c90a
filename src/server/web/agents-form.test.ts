import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromAgent, parseAgentForm } from './pages/agent-form.tsx';

const base = { name: 'Demo', runtime: 'demo', model: 'fountain/demo', system: '', sandbox_provider: '' };

describe('agent form validation', () => {
  it('takes a custom runtime, a credential set and session settings, and refuses an empty command in words', () => {
    const custom = {
      ...base,
      runtime: 'custom',
      model: 'anthropic/claude-sonnet-4-5',
      custom_command: 'my-agent --acp',
      custom_install: 'npm:my-agent@1.2.3',
      custom_env: 'LOG=info',
      custom_credentials: 'anthropic_api_key ANTHROPIC_API_KEY ANTHROPIC_BASE_URL',
      credential_set: 'work',
      session_mode: 'plan',
      session_options: 'effort=high',
    };
    const r = parseAgentForm(custom, ['runner']);
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.fields.customRuntime, {
      command: ['my-agent', '--acp'],
      install: { npm: 'my-agent@1.2.3' },
      env: { LOG: 'info' },
      credentials: [{ provider: 'anthropic_api_key', env: 'ANTHROPIC_API_KEY', base_url_env: 'ANTHROPIC_BASE_URL' }],
    });
    assert.equal(r.fields.credentialSet, 'work');
    assert.deepEqual(r.fields.sessionSettings, { mode: 'plan', options: { effort: 'high' } });
    const empty = parseAgentForm({ ...custom, custom_command: '' }, ['runner']);
    assert.ok(!empty.ok);
    assert.match(empty.errors.custom_runtime ?? '', /command must not be empty/);
    const noBase = parseAgentForm({ ...custom, custom_credentials: 'anthropic_api_key K' }, ['runner']);
    assert.ok(!noBase.ok);
    assert.match(noBase.errors.custom_runtime ?? '', /base_url_env is required under gateway delivery/);
    const badSet = parseAgentForm({ ...custom, credential_set: 'Bad Set' }, ['runner']);
    assert.ok(!badSet.ok);
    assert.match(badSet.errors.credential_set ?? '', /credential set name/);
  });

  it('accepts a demo agent and builds its permission policy from the selects', () => {
    const r = parseAgentForm({ ...base, policy_default: 'ask', policy_execute: 'auto_deny', policy_read: '' }, [
      'runner',
    ]);
    assert.ok(r.ok);
    assert.deepEqual(r.fields, {
      name: 'Demo',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      sandboxProvider: null,
      permissionPolicy: { default: 'ask', execute: 'auto_deny' },
      credentialDelivery: 'gateway',
      customRuntime: null,
      credentialSet: 'default',
      sessionSettings: {},
      warmPool: 0,
    });
  });

  it('takes a warm pool from 0 to 10 and refuses anything else beside its field', () => {
    const two = parseAgentForm({ ...base, warm_pool: '2' }, ['runner']);
    assert.ok(two.ok && two.fields.warmPool === 2);
    for (const bad of ['11', '-1', '1.5', 'x']) {
      const r = parseAgentForm({ ...base, warm_pool: bad }, ['runner']);
      assert.ok(!r.ok, bad);
      assert.match(r.errors.warm_pool ?? '', /from 0 to 10/, bad);
    }
  });

  it('refuses gateway delivery for a hosted sandbox without PUBLIC_URL, and takes direct', () => {
    const claude = { ...base, runtime: 'claude', model: 'anthropic/claude-sonnet-4-5', sandbox_provider: 'e2b' };
    const refused = parseAgentForm(claude, ['runner', 'e2b'], { defaultProvider: 'runner', publicUrl: null });
    assert.ok(!refused.ok);
    assert.match(refused.errors.credential_delivery!, /needs PUBLIC_URL/);
    const direct = parseAgentForm({ ...claude, credential_delivery: 'direct' }, ['runner', 'e2b'], {
      defaultProvider: 'runner',
      publicUrl: null,
    });
    assert.ok(direct.ok && direct.fields.credentialDelivery === 'direct');
    const reachable = parseAgentForm(claude, ['runner', 'e2b'], {
      defaultProvider: 'runner',
      publicUrl: 'https://fountain.example',
    });
    assert.ok(reachable.ok && reachable.fields.credentialDelivery === 'gateway');
  });

  it('says what is wrong next to each field', () => {
    const r = parseAgentForm(
      {
        ...base,
        name: '',
        runtime: 'claude',
        model: 'openai/gpt-5',
        sandbox_provider: 'sprites',
        policy_read: 'maybe',
      },
      ['runner'],
    );
    assert.ok(!r.ok);
    assert.match(r.errors.name!, /required/);
    assert.match(r.errors.model!, /anthropic/);
    assert.match(r.errors.sandbox_provider!, /not configured/);
    assert.match(r.errors.permission_policy!, /Allow, Ask me, Refuse/);
    assert.equal(r.values.runtime, 'claude');
  });

  it('refuses an unknown runtime and a malformed model; takes an ask policy on opencode (its config enforces it)', () => {
    assert.ok(!parseAgentForm({ ...base, runtime: 'bash' }, ['runner']).ok);
    assert.ok(!parseAgentForm({ ...base, model: 'Fountain/Demo' }, ['runner']).ok);
    const oc = parseAgentForm({ ...base, runtime: 'opencode', model: 'google/gemini-2.5-pro', policy_execute: 'ask' }, [
      'runner',
    ]);
    assert.ok(oc.ok && oc.fields.permissionPolicy.execute === 'ask');
  });

  it('preselects ask as the default verdict of a new agent', () => {
    assert.deepEqual(fromAgent(undefined).policy, { default: 'ask' });
  });
});
