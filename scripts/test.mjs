// Runs every *.test.ts under src/, test/ and bench/ with node's test runner through tsx.
// Node 20's --test takes no globs, so the files are collected here.
// Usage: node scripts/test.mjs [path-filter...]
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const roots = ['src', 'test', 'bench'];
const filters = process.argv.slice(2);
const files = [];
const walk = (dir) => {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry.startsWith('.')) continue;
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) walk(full);
    else if (entry.endsWith('.test.ts') || entry.endsWith('.test.tsx')) files.push(full);
  }
};
for (const root of roots) if (existsSync(root)) walk(root);
const selected = filters.length ? files.filter((f) => filters.some((x) => f.includes(x))) : files;
// Longest files first, the rest in name order: with two files at a time, a long file started last would
// run alone at the end. Seconds of file time in the clean clone's suite of 2026-12-05 (concurrency 2).
const SLOW_FIRST = [
  'test/runner-microvm-conformance.test.ts', // real QEMU VMs
  'test/real-agents/namespace.test.ts', // the four runtimes on a namespace runner, two at a time
  'test/real-agents/restore.test.ts', // claude, gemini and codex restored onto another runner
  'test/microvm-restore.test.ts', // a QEMU microVM's demo cycle with a restore
  'test/real-agents/gemini.test.ts', // 133
  'test/real-agents/opencode.test.ts', // 97
  'test/real-agents/claude.test.ts', // 72
  'test/real-agents/budget.test.ts', // a real Claude Code stopped by a token budget
  'test/real-agents/codex.test.ts', // 53
  'test/checkpoint-restart.test.ts', // server processes restarted on the embedded database and PostgreSQL
  'test/web/repository-branch.test.ts',
  'test/repository-branch.test.ts',
  'test/web/walk.test.ts', // 48
  'test/cluster-caddy.test.ts', // 87 before its teardown stopped waiting ~55 s on Caddy's graceful stop
  'test/web/browser.test.ts', // 38
  'test/runner-install.test.ts', // 35
  'test/recovery.test.ts', // 35
  'bench/bench.test.ts', // 31
  'test/web/new-user.test.ts', // 31
  'src/runner/backends/firecracker/qemu.test.ts', // 30
  'src/server/store/pglite-template.test.ts', // 28
  'test/cli.test.ts', // 26
];
const rank = (f) => {
  const i = SLOW_FIRST.findIndex((s) => f.endsWith(s));
  return i === -1 ? SLOW_FIRST.length : i;
};
selected.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// Two files at a time: at three (tried 2026-12-05 on a clean clone) the suite was no shorter, the real
// agents' start-up is CPU work, and the load made two browser tests at 390 px time out.
const concurrency = process.env.FOUNTAIN_TEST_CONCURRENCY ?? '2';
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    // FOUNTAIN_TEST_TAP=<file> also writes TAP there: it names each file with its duration (the spec does not).
    ...(process.env.FOUNTAIN_TEST_TAP
      ? ['--test-reporter=tap', `--test-reporter-destination=${process.env.FOUNTAIN_TEST_TAP}`]
      : []),
    ...selected,
  ],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
