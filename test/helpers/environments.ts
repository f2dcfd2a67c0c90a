/**
 * What the environment end-to-end tests share: a local npm package tarball, the conversation calls
 * (create, prompt, wait for a stage, read every event) over the public API, and a search of every
 * output for secret values. Tests only.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { until } from '../../src/server/conversations/testing.ts';
import { answerOf, call, type Json } from './http.ts';

/** `npm pack` of a one-file package whose bin prints a greeting; returns the tarball's path. */
export async function npmTarball(dir: string, name: string, greeting: string): Promise<string> {
  const pkg = join(dir, name);
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name, version: '1.0.0', bin: { [name]: 'cli.js' } }));
  writeFileSync(join(pkg, 'cli.js'), `#!/usr/bin/env node\nconsole.log(${JSON.stringify(greeting)});\n`, { mode: 0o755 });
  const { stdout } = await promisify(execFile)('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: pkg, env: { ...process.env, npm_config_cache: join(dir, '.npm-cache') } });
  return join(dir, stdout.trim().split('\n').pop()!);
}

export interface Api {
  (method: string, path: string, body?: unknown): ReturnType<typeof call>;
}

export const apiFor = (base: () => string, key: () => string): Api => (method, path, body) => call(base(), key(), method, path, body);

/** Every stored event of a conversation, oldest first. */
export async function allEvents(api: Api, conversationId: string): Promise<Json[]> {
  const out: Json[] = [];
  for (let after = 0; ; ) {
    const page = await api('GET', `/api/conversations/${conversationId}/events?after=${after}&limit=1000`);
    const data = page.body.data as Json[];
    out.push(...data);
    if (data.length < 1000) return out;
    after = data[data.length - 1].id;
  }
}

/** Stage events as `stage/state` strings with their parsed data. */
export async function stages(api: Api, conversationId: string, afterId = 0): Promise<Array<{ id: number; what: string; data: Json }>> {
  return (await allEvents(api, conversationId))
    .filter((e) => e.kind === 'stage' && e.id > afterId)
    .map((e) => ({ id: e.id, what: `${e.stage}/${e.state}`, data: JSON.parse(e.data || '{}') }));
}

export async function waitStage(api: Api, conversationId: string, what: string, afterId = 0, timeoutMs = 120_000): Promise<{ id: number; what: string; data: Json }> {
  return until(async () => {
    const all = await stages(api, conversationId, afterId);
    const failed = what === 'provision/done' ? all.find((s) => s.what === 'provision/failed') : undefined;
    if (failed) throw new Error(`provisioning failed instead: ${JSON.stringify(failed.data)}`);
    return all.find((s) => s.what === what);
  }, `${what} of ${conversationId}`, timeoutMs);
}

/** Sends a prompt and returns the agent's answer once the turn ended. */
export async function ask(api: Api, conversationId: string, prompt: string): Promise<string> {
  const r = await api('POST', `/api/conversations/${conversationId}/prompts`, { prompt });
  if (r.status !== 200) throw new Error(`prompt refused: ${r.status} ${JSON.stringify(r.body)}`);
  const turnId = r.body.turn_id as string;
  const turn = await until(async () => {
    const turns = (await api('GET', `/api/conversations/${conversationId}/turns`)).body.data as Json[];
    const t = turns.find((x) => x.id === turnId);
    return t && ['completed', 'failed', 'interrupted'].includes(t.status) ? t : null;
  }, `turn ${turnId} to end`);
  const events = await allEvents(api, conversationId);
  if (turn.status !== 'completed') {
    const said = events.filter((e) => e.turn_id === turnId && e.kind === 'stage').map((e) => `${e.stage}/${e.state} ${e.data}`);
    throw new Error(`turn for ${JSON.stringify(prompt)} ended ${turn.status}: ${said.join(' | ')}`);
  }
  return answerOf(events, turnId);
}

/** The places in `haystacks` where any of `needles` occurs, named by their label. */
export function leaks(haystacks: Readonly<Record<string, string>>, needles: readonly string[]): string[] {
  const found: string[] = [];
  for (const [label, text] of Object.entries(haystacks)) for (const n of needles) if (text.includes(n)) found.push(`${label} holds ${n.slice(0, 4)}…`);
  return found;
}
