/**
 * Shared plumbing for the CLI's API commands: credentials to a client, errors to exit codes,
 * and a line reader that both prompts and permission questions draw from.
 */
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import { ApiError, FountainApi } from './api.ts';
import { resolveCredentials } from './credentials.ts';

export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export function apiFor(cmd: Command): FountainApi {
  const profile = (cmd.optsWithGlobals() as { profile?: string }).profile;
  const creds = resolveCredentials({ profile });
  if (!creds.apiKey) {
    throw new CliError(
      `no API key for profile "${creds.profile}": run \`fountain auth login\` or set FOUNTAIN_API_KEY`,
      2,
    );
  }
  return new FountainApi({ baseUrl: creds.baseUrl, apiKey: creds.apiKey });
}

/** Wraps a command action so API and CLI errors print one plain line and set the exit code. */
export const action =
  <A extends unknown[]>(fn: (...args: A) => Promise<void>) =>
  async (...args: A): Promise<void> => {
    try {
      await fn(...args);
    } catch (e) {
      if (e instanceof ApiError) {
        const retry = e.retryAfter ? ` (retry after ${e.retryAfter} s)` : '';
        process.stderr.write(`fountain: ${e.code}: ${e.message}${retry}\n`);
        process.exitCode = 1;
      } else if (e instanceof CliError) {
        process.stderr.write(`fountain: ${e.message}\n`);
        process.exitCode = e.exitCode;
      } else {
        throw e;
      }
    }
  };

/** Lines from stdin, one at a time, whether stdin is a terminal or a pipe. */
export class LineReader {
  readonly #lines: string[] = [];
  readonly #waiters: Array<(line: string | null) => void> = [];
  #closed = false;
  readonly #rl;

  constructor(input: NodeJS.ReadableStream = process.stdin) {
    this.#rl = createInterface({ input, terminal: false });
    this.#rl.on('line', (line) => {
      const w = this.#waiters.shift();
      if (w) w(line);
      else this.#lines.push(line);
    });
    this.#rl.on('close', () => {
      this.#closed = true;
      for (const w of this.#waiters.splice(0)) w(null);
    });
  }

  /** The next line, or null at end of input. */
  next(): Promise<string | null> {
    const line = this.#lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.#closed) return Promise.resolve(null);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  close(): void {
    this.#rl.close();
  }
}

export const printJson = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

/** Prints rows as aligned columns. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  process.stdout.write(`${line(header)}\n${rows.map(line).join('\n')}${rows.length ? '\n' : ''}`);
}
