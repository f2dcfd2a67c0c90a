/**
 * Server-sent HTML for htmx's SSE extension: a stream that re-renders named fragments when something
 * changes and sends only the ones whose HTML differs, plus the helper that renders JSX to a string.
 */
import type { Context } from 'hono';
import { sseTail } from '../http/sse.ts';

export const toHtml = async (el: unknown): Promise<string> =>
  String(await Promise.resolve((el as { toString(): string | Promise<string> }).toString()));

export interface FragmentStreamOptions {
  /** Renders every fragment by SSE event name. */
  readonly render: () => Promise<ReadonlyMap<string, string>>;
  /** Subscribes to change signals; returns the unsubscribe. Called again after each render (sources may change). */
  readonly watch: (changed: () => void) => () => void;
  /** A re-render even without a signal, for state that has no change event. */
  readonly refreshMs: number;
  readonly onError: (e: unknown) => void;
}

/** Keeps the connection open until the client leaves, on the one SSE loop (http/sse.ts), which sends the heartbeats. */
export function fragmentStream(c: Context, opts: FragmentStreamOptions): Response {
  const last = new Map<string, string>();
  let pending = false;
  let primed = false;
  let unwatch: () => void = () => {};
  let refresh: NodeJS.Timeout | undefined;
  let changed: () => void = () => {};
  return sseTail(c, {
    signals: {
      watch: (wake) => {
        changed = () => {
          pending = true;
          wake();
        };
        unwatch = opts.watch(changed);
        refresh = setInterval(changed, opts.refreshMs);
        return () => {
          clearInterval(refresh);
          unwatch();
        };
      },
      flush: async (stream) => {
        if (!primed) {
          // The first render only records what the page already shows.
          primed = true;
          for (const [event, html] of await opts.render()) last.set(event, html);
          return;
        }
        if (!pending) return;
        // Coalesce bursts (a streamed answer) into one render.
        await new Promise((r) => setTimeout(r, 50));
        pending = false;
        const frags = await opts.render();
        // Sources may change with what was rendered: subscribe again.
        unwatch();
        unwatch = opts.watch(changed);
        for (const [event, html] of frags) {
          if (last.get(event) === html) continue;
          last.set(event, html);
          await stream.writeSSE({ event, data: html });
        }
      },
    },
    onError: opts.onError,
  });
}
