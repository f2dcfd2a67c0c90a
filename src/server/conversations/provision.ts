/**
 * Preparing a created sandbox for its runtime: the
 * instructions file, `/home/sprite/.env` (0600), the workspace, and the ACP adapter install.
 * Everything goes through the SandboxAdapter; nothing here knows which provider it talks to.
 */
import type { Handle, SandboxAdapter } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { SANDBOX_HOME, dotenv, installScript, type RuntimeSpec } from '../runtimes/table.ts';
import { packageCommands } from '../environments/steps.ts';
import type { CustomRuntime } from '../store/conversation-schema.ts';

const sh = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

const BINS_OF =
  'const p = require(process.argv[1]); const b = p.bin;' +
  ' console.log(typeof b === "string" ? p.name.split("/").pop() : Object.keys(b || {}).join(" "))';

/**
 * A custom runtime's package, installed only when absent (npm: that exact name@version under the global
 * prefix; apt: the package known to dpkg), its npm bins linked into ~/.local/bin like the adapters'.
 */
export function customInstallScript(p: NonNullable<CustomRuntime['install']>): string {
  if ('npm' in p) {
    const at = p.npm.lastIndexOf('@');
    const name = p.npm.slice(0, at);
    return [
      'set -e',
      `mkdir -p "$HOME/.local/bin"`,
      `npm ls -g --depth=0 ${sh(p.npm)} >/dev/null 2>&1 || ${packageCommands({ apt: [], npm: [p.npm] })[0]}`,
      // The package's bins: `bin` is a name → path map, or one path named after the package.
      `for b in $(node -e ${sh(BINS_OF)} "$(npm root -g)/${name}/package.json"); do ln -sf "$(npm prefix -g)/bin/$b" "$HOME/.local/bin/$b"; done`,
    ].join('\n');
  }
  const bare = p.apt.replace(/=.*$/, '');
  return `dpkg -s ${sh(bare)} >/dev/null 2>&1 || { ${packageCommands({ apt: [p.apt], npm: [] })[0]}; }`;
}

export interface PrepareOptions {
  readonly system: string;
  readonly env: ReadonlyArray<readonly [string, string]>;
  readonly installTimeoutMs: number;
}

const INSTRUCTIONS_HEADER = "<!-- Written by Fountain from the agent's system prompt. -->\n\n";
const encoder = new TextEncoder();

const tail = (bytes: Uint8Array, max = 400): string => {
  const text = Buffer.from(bytes).toString('utf8').trim();
  return text.length > max ? `…${text.slice(-max)}` : text;
};

export async function prepareSandbox(
  adapter: SandboxAdapter,
  handle: Handle,
  spec: RuntimeSpec,
  opts: PrepareOptions,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const envFile = await adapter.files.writeFile(handle, `${SANDBOX_HOME}/.env`, encoder.encode(dotenv(opts.env)), {
    mode: 0o600,
  });
  if (!envFile.ok) return { ok: false, reason: `writing ${SANDBOX_HOME}/.env failed: ${describeError(envFile.error)}` };

  if (opts.system.trim() !== '') {
    const w = await adapter.files.writeFile(
      handle,
      spec.instructionsFile,
      encoder.encode(INSTRUCTIONS_HEADER + opts.system),
    );
    if (!w.ok) return { ok: false, reason: `writing ${spec.instructionsFile} failed: ${describeError(w.error)}` };
  }

  if (spec.workspace) {
    const r = await adapter.processes.exec(
      handle,
      'sh',
      ['-c', `mkdir -p '${spec.workspace}' && cd '${spec.workspace}' && (test -d .git || git init -q)`],
      {
        timeoutMs: 30_000,
        stderrToStdout: true,
      },
    );
    if (!r.ok) return { ok: false, reason: `preparing the workspace failed: ${describeError(r.error)}` };
    if (r.value.exitCode !== 0)
      return { ok: false, reason: `preparing the workspace exited ${r.value.exitCode}: ${tail(r.value.output)}` };
  }

  if (spec.install) {
    const r = await adapter.processes.exec(handle, 'sh', ['-c', installScript(spec.install)], {
      timeoutMs: opts.installTimeoutMs,
      stderrToStdout: true,
    });
    if (!r.ok)
      return {
        ok: false,
        reason: `installing ${spec.install.pkg}@${spec.install.version} failed: ${describeError(r.error)}`,
      };
    if (r.value.exitCode !== 0) {
      return {
        ok: false,
        reason: `installing ${spec.install.pkg}@${spec.install.version} exited ${r.value.exitCode}: ${tail(r.value.output)}`,
      };
    }
  }

  if (spec.packages) {
    const what = 'npm' in spec.packages ? spec.packages.npm : spec.packages.apt;
    const r = await adapter.processes.exec(handle, 'sh', ['-c', customInstallScript(spec.packages)], {
      timeoutMs: opts.installTimeoutMs,
      stderrToStdout: true,
    });
    if (!r.ok) return { ok: false, reason: `installing ${what} failed: ${describeError(r.error)}` };
    if (r.value.exitCode !== 0)
      return { ok: false, reason: `installing ${what} exited ${r.value.exitCode}: ${tail(r.value.output)}` };
  }

  if (spec.requiresBin) {
    const r = await adapter.processes.exec(handle, 'sh', ['-c', `command -v '${spec.requiresBin}'`], {
      timeoutMs: 30_000,
    });
    if (!r.ok) return { ok: false, reason: `checking for ${spec.requiresBin} failed: ${describeError(r.error)}` };
    if (r.value.exitCode !== 0) return { ok: false, reason: `${spec.requiresBin} is not installed in the sandbox` };
  }
  return { ok: true };
}
