/**
 * Server-sent HTML for htmx's SSE extension: a stream that re-renders named fragments when something
 * changes and sends only the ones whose HTML differs, plus the helper that renders JSX to a string.
 */
import type { Context } from 'hono';
import { openSse } from '../http/sse.ts';

export const toHtml = async (el: unknown): Promise<string> => String(await Promise.resolve((el as { toString(): string | Promise<string> }).toString()));

export interface FragmentStreamOptions {
  /** Renders every fragment by SSE event name. */
  readonly render: () => Promise<ReadonlyMap<string, string>>;
  /** Subscribes to change signals; returns the unsubscribe. Called again after each render (sources may change). */
  readonly watch: (changed: () => void) => () => void;
  /** A re-render even without a signal, for state that has no change event. */
  readonly refreshMs: number;
  readonly onError: (e: unknown) => void;
}

/** Keeps the connection open until the client leaves; comments every 15 s keep proxies from closing it. */
export function fragmentStream(c: Context, opts: FragmentStreamOptions): Response {
  return openSse(c, async (stream) => {
    const last = new Map<string, string>();
    let closed = false;
    let pending = false;
    let unwatch: () => void = () => {};
    let wake: () => void = () => {};
    const changed = () => {
      pending = true;
      wake();
    };
    const cycle = async () => {
      pending = false;
      const frags = await opts.render();
      unwatch();
      unwatch = opts.watch(changed);
      for (const [event, html] of frags) {
        if (last.get(event) === html) continue;
        last.set(event, html);
        await stream.writeSSE({ event, data: html });
      }
    };
    stream.onAbort(() => {
      closed = true;
      wake();
    });
    const refresh = setInterval(changed, opts.refreshMs);
    const heartbeat = setInterval(() => void stream.write(': heartbeat\n\n').catch(() => undefined), 15_000);
    try {
      // The first render only records what the page already shows.
      for (const [event, html] of await opts.render()) last.set(event, html);
      unwatch = opts.watch(changed);
      while (!closed) {
        if (!pending) await new Promise<void>((r) => (wake = r));
        if (closed) break;
        // Coalesce bursts (a streamed answer) into one render.
        await new Promise((r) => setTimeout(r, 50));
        await cycle();
      }
    } catch (e) {
      if (!closed) opts.onError(e);
    } finally {
      clearInterval(refresh);
      clearInterval(heartbeat);
      unwatch();
    }
  });
}
