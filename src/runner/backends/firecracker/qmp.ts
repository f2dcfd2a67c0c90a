/**
 * A minimal QMP client: one connection per command (greeting, qmp_capabilities, the command),
 * skipping asynchronous event lines until a `return` or an `error`. Never throws.
 */
import { createConnection } from 'node:net';
import { z } from 'zod';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';

const lineSchema = z
  .object({
    QMP: z.unknown().optional(),
    return: z.unknown().optional(),
    error: z.object({ class: z.string(), desc: z.string() }).optional(),
    event: z.string().optional(),
  })
  .loose();

export function qmp(
  path: string,
  command: string,
  args: Record<string, unknown> | undefined,
  timeoutMs: number,
): Promise<Result<unknown, string>> {
  return new Promise((resolve) => {
    const sock = createConnection(path);
    let buf = '';
    let stage: 'greeting' | 'capabilities' | 'command' = 'greeting';
    let settled = false;
    const finish = (r: Result<unknown, string>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish(err(`QMP ${command}: no answer within ${timeoutMs} ms`)), timeoutMs);
    const send = (execute: string, a?: Record<string, unknown>) =>
      sock.write(`${JSON.stringify(a ? { execute, arguments: a } : { execute })}\n`);
    sock.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
        const text = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!text) continue;
        let parsed;
        try {
          parsed = lineSchema.safeParse(JSON.parse(text));
        } catch {
          return finish(err(`QMP ${command}: not JSON: ${text.slice(0, 100)}`));
        }
        if (!parsed.success) return finish(err(`QMP ${command}: unexpected line ${text.slice(0, 100)}`));
        const line = parsed.data;
        if (line.event !== undefined) continue;
        if (stage === 'greeting' && line.QMP !== undefined) {
          stage = 'capabilities';
          send('qmp_capabilities');
          continue;
        }
        if (line.error) return finish(err(`QMP ${command}: ${line.error.class}: ${line.error.desc}`));
        if (stage === 'capabilities') {
          stage = 'command';
          send(command, args);
          continue;
        }
        if (stage === 'command' && 'return' in line) return finish(ok(line.return));
      }
    });
    sock.once('error', (e) => finish(err(`QMP ${command}: ${e.message}`)));
    sock.once('close', () => finish(err(`QMP ${command}: the connection closed`)));
  });
}
