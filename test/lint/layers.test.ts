import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { RULES, violations } from './layers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Imports that broke a rule when the rules were written (routes and web pages that still query the
 * store themselves instead of calling a service). The list only shrinks: a new violation fails, and so
 * does an entry that no longer happens, so whoever moves a query into its service deletes its line.
 */
const KNOWN = new Set([
  'src/server/account/admin-routes.ts -> src/server/account/keys-store.ts',
  'src/server/account/admin-routes.ts -> src/server/account/store.ts',
  'src/server/account/keys-routes.ts -> src/server/account/keys-store.ts',
  'src/server/account/keys-routes.ts -> src/server/store/schema.ts',
  'src/server/account/routes.ts -> src/server/account/store.ts',
  'src/server/agents/routes.ts -> src/server/agents/store.ts',
  'src/server/agents/routes.ts -> src/server/store/conversation-schema.ts',
  'src/server/conversations/routes.ts -> src/server/conversations/events-store.ts',
  'src/server/conversations/routes.ts -> src/server/conversations/store.ts',
  'src/server/conversations/routes.ts -> src/server/store/conversation-schema.ts',
  'src/server/runners/routes.ts -> src/server/runners/store.ts',
  'src/server/team/mcp-routes.ts -> src/server/conversations/store.ts',
  'src/server/team/mcp-routes.ts -> src/server/store/team-schema.ts',
  'src/server/team/routes.ts -> src/server/agents/store.ts',
  'src/server/team/routes.ts -> src/server/team/store.ts',
  'src/server/team/schedule-routes.ts -> src/server/agents/store.ts',
  'src/server/team/schedule-routes.ts -> src/server/team/store.ts',
  'src/server/web/pages/agents.tsx -> src/server/agents/store.ts',
  'src/server/web/pages/agents.tsx -> src/server/store/conversation-schema.ts',
  'src/server/web/pages/conversation.tsx -> src/server/agents/store.ts',
  'src/server/web/pages/conversation.tsx -> src/server/conversations/events-store.ts',
  'src/server/web/pages/conversation.tsx -> src/server/conversations/store.ts',
  'src/server/web/pages/keys.tsx -> src/server/account/keys-store.ts',
  'src/server/web/pages/runners.tsx -> src/server/runners/store.ts',
  'src/server/web/roster.ts -> src/server/agents/store.ts',
  'src/server/web/roster.ts -> src/server/team/store.ts',
  'src/server/web/session.ts -> src/server/account/keys-store.ts',
  'src/server/web/session.ts -> src/server/account/signin-store.ts',
  'src/server/web/session.ts -> src/server/store/schema.ts',
]);

describe('the dependency rules of DESIGN.md', () => {
  const found = violations(ROOT);
  const key = (v: { file: string; target: string }) => `${v.file} -> ${v.target}`;

  it('no import breaks a never rule, apart from the known ones being moved out', () => {
    const fresh = found.filter((v) => !KNOWN.has(key(v))).map((v) => `${v.rule}: ${key(v)}`);
    assert.deepEqual(fresh, []);
  });

  it('every known violation still exists (delete the line of one that was fixed)', () => {
    const now = new Set(found.map(key));
    assert.deepEqual([...KNOWN].filter((k) => !now.has(k)), []);
  });

  it('each rule catches the import it names (a rule matching nothing would hold vacuously)', () => {
    const examples: Record<string, [string, string]> = {
      'sandbox/ imports nothing above it': ['src/sandbox/result.ts', 'src/server/start.ts'],
      'wire/ imports nothing above it': ['src/wire/codec.ts', 'src/sandbox/index.ts'],
      'runner/ never imports server/': ['src/runner/daemon.ts', 'src/server/start.ts'],
      'a provider never imports server/': ['src/providers/e2b/adapter.ts', 'src/server/config.ts'],
      'web pages never touch the store': ['src/server/web/pages/agents.tsx', 'src/server/agents/store.ts'],
      'routes never touch the store': ['src/server/team/routes.ts', 'src/server/store/db.ts'],
      'the engine never names a provider': ['src/server/conversations/turns.ts', 'src/providers/runner/index.ts'],
    };
    for (const rule of RULES) {
      const [from, to] = examples[rule.name] ?? ['', ''];
      assert.ok(rule.from(from) && rule.to(to), rule.name);
    }
    const web = RULES.find((r) => r.name.startsWith('web pages'))!;
    assert.ok(!web.to('src/server/agents/service.ts'), 'a service is what pages call');
  });
});
