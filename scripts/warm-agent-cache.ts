/**
 * Fills the persistent npm cache (.cache/npm) with the coding agents at the versions the runtime
 * table pins, so the real-agent tests' sandbox installs read them locally. Run by .ci/run.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RUNTIME_SPECS } from '../src/server/runtimes/table.ts';

const repo = fileURLToPath(new URL('../', import.meta.url));
const cache = join(repo, '.cache', 'npm');
const prefix = join(repo, '.cache', 'agents');
mkdirSync(cache, { recursive: true });
const pkgs = Object.values(RUNTIME_SPECS).flatMap((s) => (s.install ? [`${s.install.pkg}@${s.install.version}`] : []));
for (const pkg of pkgs) {
  const t0 = Date.now();
  const r = spawnSync(
    'npm',
    ['install', '-g', '--prefix', prefix, '--no-progress', '--no-audit', '--no-fund', '--silent', pkg],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, npm_config_cache: cache, npm_config_update_notifier: 'false' },
    },
  );
  console.log(
    `${pkg}: ${r.status === 0 ? 'cached' : `npm exited ${r.status}`} (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
  if (r.status !== 0) process.exitCode = 1;
}
