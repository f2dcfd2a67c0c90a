import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { homeRelative, sandboxHomes } from './home-paths.ts';

describe('paths under the sandbox home', () => {
  const homes = sandboxHomes({ sandbox: { runner: { path: '/var/lib/fountain/sandboxes/runner-ab12' } } });
  it('shows the runner host directory and /home/sprite as ~', () => {
    assert.equal(homeRelative('Edit /var/lib/fountain/sandboxes/runner-ab12/src/a.ts', homes), 'Edit ~/src/a.ts');
    assert.equal(homeRelative('{"file_path":"/home/sprite/app/x"}', homes), '{"file_path":"~/app/x"}');
    assert.equal(homeRelative('cd /var/lib/fountain/sandboxes/runner-ab12 && ls', homes), 'cd ~ && ls');
  });
  it('leaves a longer name that starts with the home, and other paths, alone', () => {
    assert.equal(
      homeRelative('/var/lib/fountain/sandboxes/runner-ab12-other/x /etc/hosts', homes),
      '/var/lib/fountain/sandboxes/runner-ab12-other/x /etc/hosts',
    );
  });
});
