import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isRoutes, RULES, violations } from './layers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('the dependency rules of DESIGN.md', () => {
  const found = violations(ROOT);
  const key = (v: { file: string; target: string }) => `${v.file} -> ${v.target}`;

  it('no import breaks a never rule (there are no exceptions: routes and pages call services)', () => {
    assert.deepEqual(
      found.map((v) => `${v.rule}: ${key(v)}`),
      [],
    );
  });

  it('routes and web pages write no query of their own either (no drizzle-orm: a query goes through a service)', () => {
    const walk = (dir: string, out: string[] = []): string[] => {
      for (const e of readdirSync(dir)) {
        const p = join(dir, e);
        if (statSync(p).isDirectory()) walk(p, out);
        else if (/\.tsx?$/.test(e) && !/\.test\.tsx?$/.test(e)) out.push(p);
      }
      return out;
    };
    const querying = walk(join(ROOT, 'src/server'))
      .map((abs) => relative(ROOT, abs).split('\\').join('/'))
      .filter((f) => isRoutes(f) || f.startsWith('src/server/web/'))
      .filter((f) =>
        /^(?:import|export)\s+(?!type\s)[^;]*?from\s+'drizzle-orm(?:\/[^']*)?'/m.test(
          readFileSync(join(ROOT, f), 'utf8'),
        ),
      );
    assert.deepEqual(querying, []);
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
