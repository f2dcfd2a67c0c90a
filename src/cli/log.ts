/**
 * Logger construction for every fountain command: JSON lines by default,
 * pretty output when stderr is a terminal. Components receive a logger; they never build one.
 */
import pino from 'pino';
import type { Logger } from 'pino';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function createLogger(level: LogLevel = 'info', name = 'fountain'): Logger {
  const pretty = process.stderr.isTTY && process.env.FOUNTAIN_LOG_FORMAT !== 'json';
  const transport = pretty
    ? pino.transport({
        target: 'pino-pretty',
        options: { destination: 2, ignore: 'pid,hostname', translateTime: 'HH:MM:ss' },
      })
    : pino.destination(2);
  return pino(
    { name, level, redact: ['apiKey', 'api_key', 'key', 'token', 'authorization', '*.authorization'] },
    transport,
  );
}
