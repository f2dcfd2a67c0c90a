/**
 * The idle runner connections of the connections benchmark, in their own process (with a raised
 * open-file limit): plain ws clients that answer pings and say nothing, opened and closed on request.
 */
import WebSocket from 'ws';
import { z } from 'zod';
import { openFileLimit } from './limits.ts';

const commandSchema = z.union([
  z.object({
    open: z.object({
      url: z.string(),
      key: z.string().optional(),
      from: z.number().int().nonnegative(),
      to: z.number().int().nonnegative(),
    }),
  }),
  z.object({ close: z.literal(true) }),
]);

const sockets: WebSocket[] = [];
const send = (m: unknown) => process.send?.(m);

async function open(url: string, key: string, from: number, to: number): Promise<void> {
  const BATCH = 200;
  for (let i = from; i < to; i += BATCH) {
    const batch: Promise<void>[] = [];
    for (let j = i; j < Math.min(to, i + BATCH); j++) {
      batch.push(
        new Promise((resolve, reject) => {
          const ws = new WebSocket(`${url}?name=idle-${j}`, {
            perMessageDeflate: false,
            headers: { authorization: `Bearer ${key}` },
          });
          ws.once('open', () => resolve());
          ws.once('error', reject);
          ws.on('message', () => {});
          sockets.push(ws);
        }),
      );
    }
    await Promise.all(batch);
  }
}

process.on('message', (m: unknown) => {
  const cmd = commandSchema.safeParse(m);
  if (!cmd.success) return;
  if ('open' in cmd.data) {
    const { url, key, from, to } = cmd.data.open;
    open(url, key ?? 'bench', from, to).then(
      () => send({ opened: sockets.length }),
      (e: unknown) => send({ error: e instanceof Error ? e.message : String(e) }),
    );
  } else {
    for (const ws of sockets) ws.terminate();
    sockets.length = 0;
    send({ closed: true });
  }
});
process.on('disconnect', () => process.exit(0));
send({ fileLimit: openFileLimit() });
