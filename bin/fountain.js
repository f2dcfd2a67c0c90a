#!/usr/bin/env node
// Entry point of the `fountain` executable: runs the compiled dist/ (built by `npm install`'s prepare
// step) while it matches the sources, else the TypeScript sources through tsx, so an edit never runs stale code.
import { BUNDLE_DIR, distIsFresh } from './dist-stamp.mjs';

if (process.env.FOUNTAIN_FROM_SOURCE !== '1' && distIsFresh()) {
  await import(`../dist/${BUNDLE_DIR}/main.js`);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
