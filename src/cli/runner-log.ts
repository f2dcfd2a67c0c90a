/**
 * The runner's log: short human lines on a terminal (connected, sessions, reconnecting in N s), JSON
 * lines otherwise or with `--log-format json`. Formatted in this thread, so the one-file artifact needs no worker.
 */
import pino from 'pino';
import type { Logger } from 'pino';
import type { LogLevel } from './log.ts';

export const LOG_FORMATS = ['auto', 'human', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const REDACT = ['apiKey', 'api_key', 'key', 'token', 'authorization', '*.authorization'];

/** `human` when stderr is a terminal and neither the flag nor FOUNTAIN_LOG_FORMAT asks for JSON. */
export function resolveLogFormat(
  flag: LogFormat,
  env = process.env,
  tty = process.stderr.isTTY === true,
): 'human' | 'json' {
  if (flag !== 'auto') return flag;
  if (env.FOUNTAIN_LOG_FORMAT === 'json') return 'json';
  if (env.FOUNTAIN_LOG_FORMAT === 'human') return 'human';
  return tty ? 'human' : 'json';
}

type Line = Record<string, unknown> & { level: number; msg?: string; time?: number };

const seconds = (ms: unknown): string =>
  typeof ms === 'number' ? `${ms < 10_000 ? (ms / 1000).toFixed(1).replace(/\.0$/, '') : Math.round(ms / 1000)} s` : '';

/** One log record as a person reads it; null drops it (detail only JSON needs). */
export function humanLine(l: Line): string | null {
  const clock = new Date(l.time ?? Date.now()).toTimeString().slice(0, 8);
  const say = (text: string) => `${clock} ${text}`;
  switch (l.msg) {
    case 'runner: starting':
      return say(
        `runner ${String(l.runner)} starting: ${String(l.backend)} backend, sandboxes in ${String(l.root)}, server ${String(l.baseUrl)}`,
      );
    case 'runner: connected':
      return say(`connected to ${String(l.url).replace(/\/api\/runners\/ws$/, '')}`);
    case 'runner: disconnected; reconnecting':
      return say(
        l.reason === 'could not connect'
          ? `could not connect; trying again in ${seconds(l.delayMs)}`
          : `disconnected (${String(l.reason)}); reconnecting in ${seconds(l.delayMs)}`,
      );
    case 'runner: sessions':
      return say(
        l.count === 0 ? 'no sessions running' : `${String(l.count)} session${l.count === 1 ? '' : 's'} running`,
      );
    case 'runner: giving up':
      return say(`giving up: ${String(l.reason)}`);
    case 'runner: stopping sessions':
      return say('stopping: ending sessions (Ctrl-C again to exit at once)');
    case 'runner: stopped':
      return say('stopped');
    default: {
      const level = l.level >= 50 ? 'error: ' : l.level >= 40 ? 'warning: ' : '';
      const msg = String(l.msg ?? '').replace(/^runner: /, '');
      const err = l.err && typeof l.err === 'object' ? (l.err as { message?: unknown }).message : l.err;
      return say(`${level}${msg}${err ? ` (${String(err)})` : ''}`);
    }
  }
}

export function createRunnerLogger(level: LogLevel, format: 'human' | 'json', name = 'fountain-runner'): Logger {
  if (format === 'json') return pino({ name, level, redact: REDACT }, pino.destination(2));
  const out = {
    write(chunk: string) {
      let rec: Line;
      try {
        rec = JSON.parse(chunk) as Line;
      } catch {
        process.stderr.write(chunk);
        return;
      }
      const line = humanLine(rec);
      if (line !== null) process.stderr.write(`${line}\n`);
    },
  };
  return pino({ name, level, redact: REDACT }, out);
}
