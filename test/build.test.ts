/**
 * The compiled dist/: `npm run build` compiles a copy of this repository, bin/fountain.js runs the
 * bundled command while it matches src/, and falls back to the TypeScript sources once it does not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '..');

/** A copy of what the build and the executable read, with the repository's node_modules linked in. */
function copyOfRepo(): string {
  const root = mkdtempSync(join(tmpdir(), 'fountain-build-'));
  for (const p of ['src', 'bin', 'docs', 'tsconfig.json', 'package.json', 'scripts/build.mjs']) {
    cpSync(join(REPO, p), join(root, p), { recursive: true });
  }
  symlinkSync(join(REPO, 'node_modules'), join(root, 'node_modules'));
  return root;
}

const fountain = (root: string, fromSource = '') =>
  execFileSync(process.execPath, [join(root, 'bin/fountain.js'), '--version'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, FOUNTAIN_FROM_SOURCE: fromSource },
  });

test('the build compiles src/ beside its assets and the executable runs it until a source changes', {
  timeout: 120_000,
}, (t) => {
  const root = copyOfRepo();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'pipe' });

  // Paths computed from import.meta.url (migrations, static files) hold under dist/ too.
  assert.ok(existsSync(join(root, 'dist/cli/main.js')));
  assert.ok(existsSync(join(root, 'dist/server/store/migrations/0001_init.sql')));
  assert.ok(existsSync(join(root, 'dist/server/web/static/app.css')));
  assert.ok(!existsSync(join(root, 'dist/wire/codec.test.js')), 'tests are not compiled');
  assert.ok(existsSync(join(root, 'dist/runner-artifact/fountain-runner.mjs')), 'the runner the server hands out');
  assert.doesNotMatch(
    readFileSync(join(root, 'dist/cli/commands.js'), 'utf8'),
    /\.ts['"]/,
    'imports name the compiled .js files',
  );

  // The command bin/fountain.js runs: one bundle, its subcommands in chunks beside it, whose module URLs
  // are rewritten to their compiled files' (so the paths above mean the same to it).
  const bundled = readFileSync(join(root, 'dist/bundle/main.js'), 'utf8');
  assert.match(bundled, /new URL\("\.\.\/cli\/main\.js", import\.meta\.url\)/, "main's own URL is its compiled file's");

  // A marker only the compiled file prints shows which one ran.
  // (First in the module: `--version` exits inside the command parser.)
  const dist = join(root, 'dist/bundle/main.js');
  writeFileSync(dist, `process.stdout.write('ran dist\\n');\n${readFileSync(dist, 'utf8')}`);
  assert.match(fountain(root), /ran dist/);
  assert.doesNotMatch(fountain(root, '1'), /ran dist/, 'FOUNTAIN_FROM_SOURCE=1 runs the sources');

  // An edited source makes dist/ stale: the sources run, the edit shows.
  const main = join(root, 'src/cli/main.ts');
  writeFileSync(main, `process.stdout.write('ran source\\n');\n${readFileSync(main, 'utf8')}`);
  const out = fountain(root);
  assert.match(out, /ran source/);
  assert.doesNotMatch(out, /ran dist/);
});

test('adding or renaming a source file makes dist/ stale; a rebuild makes it fresh again', {
  timeout: 120_000,
}, async (t) => {
  const root = copyOfRepo();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const { distIsFresh } = await import('../bin/dist-stamp.mjs');
  const build = () => execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'pipe' });
  assert.equal(distIsFresh(root), false, 'no dist/ yet');
  build();
  assert.equal(distIsFresh(root), true);
  // Tests are not compiled: editing one leaves dist/ fresh.
  appendFileSync(join(root, 'src/wire/codec.test.ts'), '\n');
  assert.equal(distIsFresh(root), true, 'a test file');
  mkdirSync(join(root, 'src/extra'));
  assert.equal(distIsFresh(root), false, 'a new folder');
  build();
  assert.equal(distIsFresh(root), true);
  // A module no command imports (a test helper): the runner artifact and the command are real bundles,
  // which a dangling import breaks.
  const helper = join(root, 'src/runner/backends/firecracker/testing/guest-image');
  renameSync(`${helper}.ts`, `${helper}2.ts`);
  assert.equal(distIsFresh(root), false, 'a renamed file');
  build();
  writeFileSync(
    join(root, 'tsconfig.json'),
    readFileSync(join(root, 'tsconfig.json'), 'utf8').replace('ES2022', 'ES2023'),
  );
  assert.equal(distIsFresh(root), false, 'the compiler settings changed');
});
