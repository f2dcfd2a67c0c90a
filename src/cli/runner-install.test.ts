import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planUpdate } from './runner-install.ts';
import { humanLine, resolveLogFormat } from './runner-log.ts';
import { compareRunnerVersions } from './runner-version.ts';

describe('runner versions and updates', () => {
  it('orders versions by their package version; builds of one package version are equal', () => {
    assert.equal(compareRunnerVersions('0.1.0+aaaaaaaaaaaa', '0.2.0+bbbbbbbbbbbb'), -1);
    assert.equal(compareRunnerVersions('0.10.0+aaaaaaaaaaaa', '0.9.1+bbbbbbbbbbbb'), 1);
    assert.equal(compareRunnerVersions('0.1.0+aaaaaaaaaaaa', '0.1.0+bbbbbbbbbbbb'), 0);
    assert.equal(compareRunnerVersions('0.1.0', '0.1.0+bbbbbbbbbbbb'), 0);
  });

  it('installs a newer or another build, leaves the same alone, and needs --force to go back', () => {
    assert.deepEqual(planUpdate('0.1.0+a', '0.1.0+a', false), { kind: 'same' });
    assert.deepEqual(planUpdate('0.1.0+a', '0.2.0+b', false), { kind: 'install' });
    assert.deepEqual(planUpdate('0.1.0+a', '0.1.0+b', false), { kind: 'install' });
    const refused = planUpdate('0.2.0+a', '0.1.0+b', false);
    assert.equal(refused.kind, 'downgrade_refused');
    assert.match(refused.kind === 'downgrade_refused' ? refused.message : '', /older than this one .*--force/);
    assert.deepEqual(planUpdate('0.2.0+a', '0.1.0+b', true), { kind: 'install' });
  });
});

describe('the runner on a terminal', () => {
  const at = new Date(2026, 0, 1, 12, 34, 56).getTime();
  it('prints short lines for what a person watches', () => {
    assert.equal(
      humanLine({ level: 30, time: at, msg: 'runner: connected', url: 'ws://h:4000/api/runners/ws' }),
      '12:34:56 connected to ws://h:4000',
    );
    assert.equal(
      humanLine({
        level: 30,
        time: at,
        msg: 'runner: disconnected; reconnecting',
        reason: 'closed (1006)',
        delayMs: 2000,
      }),
      '12:34:56 disconnected (closed (1006)); reconnecting in 2 s',
    );
    assert.equal(humanLine({ level: 30, time: at, msg: 'runner: sessions', count: 2 }), '12:34:56 2 sessions running');
    assert.equal(humanLine({ level: 40, time: at, msg: 'runner: op failed' }), '12:34:56 warning: op failed');
  });

  it('is JSON off a terminal, with --log-format json, or with FOUNTAIN_LOG_FORMAT=json', () => {
    assert.equal(resolveLogFormat('auto', {}, true), 'human');
    assert.equal(resolveLogFormat('auto', {}, false), 'json');
    assert.equal(resolveLogFormat('json', {}, true), 'json');
    assert.equal(resolveLogFormat('auto', { FOUNTAIN_LOG_FORMAT: 'json' }, true), 'json');
  });
});
