/**
 * An agent's MCP servers for its runtime: `${VAR}` resolved from the
 * environment's variables and secrets (a missing one is an error naming it), then delivered as the
 * runtime takes them — claude's project `.mcp.json`, gemini's settings.json, or ACP `session/new`.
 */
import type { McpServer as AcpMcpServer } from '@agentclientprotocol/sdk';
import type { RuntimeSpec } from '../runtimes/table.ts';
import type { McpServer } from '../store/environment-schema.ts';

/** A file the configuration step writes (mode 0600: it may name the agent's tools' endpoints). */
export interface ConfigFile {
  readonly path: string;
  readonly content: string;
}

export interface McpDelivery {
  readonly files: readonly ConfigFile[];
  /** Appended to the platform's servers on every session/new and session/load. */
  readonly session: readonly AcpMcpServer[];
}

const VAR_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export type Resolved<T> = { ok: true; value: T } | { ok: false; missing: string; where: string };

/**
 * Replaces `${VAR}` in every string of the servers. `keep` names variables left as `${VAR}` for a
 * runtime that expands them itself from its process env (secrets, so no file holds their values).
 */
export function resolveMcpServers(
  servers: Readonly<Record<string, McpServer>>,
  vars: ReadonlyMap<string, string>,
  keep: ReadonlySet<string> = new Set(),
): Resolved<Record<string, McpServer>> {
  let missing: { name: string; where: string } | null = null;
  const sub = (text: string, where: string): string =>
    text.replace(VAR_REF, (whole, name: string) => {
      if (keep.has(name)) return whole;
      const v = vars.get(name);
      if (v === undefined) {
        missing ??= { name, where };
        return whole;
      }
      return v;
    });
  const subMap = (m: Readonly<Record<string, string>> | undefined, where: string) =>
    m ? Object.fromEntries(Object.entries(m).map(([k, v]) => [k, sub(v, `${where} ${k}`)])) : undefined;
  const out: Record<string, McpServer> = {};
  for (const [name, s] of Object.entries(servers)) {
    const at = `MCP server ${name}`;
    if ('command' in s) {
      out[name] = {
        command: sub(s.command, `${at} command`),
        ...(s.args ? { args: s.args.map((a) => sub(a, `${at} args`)) } : {}),
        ...(s.env ? { env: subMap(s.env, `${at} env`)! } : {}),
      };
    } else {
      out[name] = {
        type: s.type,
        url: sub(s.url, `${at} url`),
        ...(s.headers ? { headers: subMap(s.headers, `${at} header`)! } : {}),
      };
    }
  }
  const m = missing as { name: string; where: string } | null;
  return m ? { ok: false, missing: m.name, where: m.where } : { ok: true, value: out };
}

/**
 * The delivery of resolved servers for `spec`. File-delivered runtimes get secrets as `${KEY}`
 * references (both expand them from their process env, where secrets are); session delivery carries values.
 */
export function deliverMcp(
  spec: RuntimeSpec,
  servers: Readonly<Record<string, McpServer>>,
  vars: ReadonlyMap<string, string>,
  secretKeys: ReadonlySet<string>,
): Resolved<McpDelivery> {
  if (Object.keys(servers).length === 0) return { ok: true, value: { files: [], session: [] } };
  // Every reference must resolve, whatever stays a reference in the file.
  const full = resolveMcpServers(servers, vars);
  if (!full.ok) return full;
  switch (spec.mcpDelivery) {
    case 'claude_project': {
      const r = resolveMcpServers(servers, vars, secretKeys);
      if (!r.ok) return r;
      const mcpServers = Object.fromEntries(
        Object.entries(r.value).map(([n, s]) => [
          n,
          'command' in s ? { command: s.command, args: s.args ?? [], env: s.env ?? {} } : s,
        ]),
      );
      return {
        ok: true,
        value: {
          files: [
            { path: `${spec.cwd}/.mcp.json`, content: `${JSON.stringify({ mcpServers }, null, 2)}\n` },
            // claude-agent-acp does not launch session-scoped stdio servers; project servers need this switch.
            {
              path: `${spec.home}/${spec.configDir}/settings.json`,
              content: `${JSON.stringify({ enableAllProjectMcpServers: true }, null, 2)}\n`,
            },
          ],
          session: [],
        },
      };
    }
    case 'gemini_settings': {
      const r = resolveMcpServers(servers, vars, secretKeys);
      if (!r.ok) return r;
      const mcpServers = Object.fromEntries(
        Object.entries(r.value).map(([n, s]) => [
          n,
          'command' in s
            ? { command: s.command, args: s.args ?? [], env: s.env ?? {} }
            : s.type === 'http'
              ? { httpUrl: s.url, headers: s.headers ?? {} }
              : { url: s.url, headers: s.headers ?? {} },
        ]),
      );
      return {
        ok: true,
        value: {
          files: [
            {
              path: `${spec.home}/${spec.configDir}/settings.json`,
              content: `${JSON.stringify({ mcpServers }, null, 2)}\n`,
            },
          ],
          session: [],
        },
      };
    }
    case 'session': {
      const pairs = (m: Readonly<Record<string, string>> | undefined) =>
        Object.entries(m ?? {}).map(([name, value]) => ({ name, value }));
      const session: AcpMcpServer[] = Object.entries(full.value).map(([name, s]) =>
        'command' in s
          ? { name, command: s.command, args: s.args ?? [], env: pairs(s.env) }
          : { type: s.type, name, url: s.url, headers: pairs(s.headers) },
      );
      // opencode runs a tool unasked unless its config says `ask` for it; its MCP tools are `<server>_<tool>`.
      const files: ConfigFile[] =
        spec.id === 'opencode'
          ? [
              {
                path: `${spec.home}/${spec.configDir}/opencode.json`,
                content: `${JSON.stringify({ permission: Object.fromEntries(Object.keys(servers).map((n) => [`${n}_*`, 'ask'])) }, null, 2)}\n`,
              },
            ]
          : [];
      return { ok: true, value: { files, session } };
    }
  }
}

/**
 * The content of a runtime file the launch writes (the credential's settings) when the configuration
 * step wrote MCP settings to the same path: gemini keeps its servers in `$HOME/.gemini/settings.json`,
 * opencode the `ask` for their tools in opencode.json, and the launch, which comes later, would
 * otherwise drop them. Both JSON objects: keys merged two levels deep (so `permission` keeps both
 * sides' entries), the launch's winning; anything else: the launch's content as it is.
 */
export function mergeRuntimeFile(configured: string | undefined, launch: string): string {
  if (configured === undefined) return launch;
  const object = (text: string): Record<string, unknown> | null => {
    try {
      const v: unknown = JSON.parse(text);
      return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  };
  const a = object(configured);
  const b = object(launch);
  if (!a || !b) return launch;
  const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
  const merged: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) merged[k] = isObject(merged[k]) && isObject(v) ? { ...merged[k], ...v } : v;
  return `${JSON.stringify(merged, null, 2)}\n`;
}
