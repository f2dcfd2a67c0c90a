// Part of `npm install` (npm's `prepare`, after the build): makes the migrated embedded-database template
// inside the package (.cache/pglite-template), so the first `fountain up` on a new machine copies it
// instead of spending 6–11 s of CPU on PGlite's initdb. A failure only warns: the server makes the
// database the slow way then.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DIST } from '../bin/dist-stamp.mjs';

const started = Date.now();
const dataDir = mkdtempSync(join(tmpdir(), 'fountain-template-'));
try {
  const { openDatabase } = await import(pathToFileURL(join(DIST, 'server/store/db.js')).href);
  const { bundledTemplateRoot } = await import(pathToFileURL(join(DIST, 'server/store/pglite-template.js')).href);
  // The package's template is the cache here: made when missing, copied when present (then nothing to do).
  const root = bundledTemplateRoot();
  const db = await openDatabase({ dataDir, templateDir: root, bundledTemplateDir: null });
  await db.close();
  if (db.templateError) throw new Error(db.templateError);
  process.stderr.write(`fountain: embedded database template ready in ${root} (${Date.now() - started} ms)\n`);
} catch (e) {
  process.stderr.write(
    `fountain: warning: no embedded database template made (${e?.message ?? e}); the first start makes it\n`,
  );
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
