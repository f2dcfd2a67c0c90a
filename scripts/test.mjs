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
selected.sort();
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const concurrency = process.env.FOUNTAIN_TEST_CONCURRENCY ?? '2';
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...selected],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
