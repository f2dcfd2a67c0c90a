/**
 * A turn's images on the conversation page: thumbnails under the user's message, their bytes served
 * through a page route the session cookie guards (the API's route wants the key; events carry no bytes).
 */
import { Hono } from 'hono';
import type { WebDeps, WebEnv } from './context.ts';

/** The page's address of one image (the API's is /api/…, behind the key). */
export const webImagePath = (conversationId: string, turnId: string, position: number): string =>
  `/conversations/${conversationId}/turns/${turnId}/images/${position}`;

const TYPE_WORDS: Readonly<Record<string, string>> = {
  'image/png': 'PNG',
  'image/jpeg': 'JPEG',
  'image/gif': 'GIF',
  'image/webp': 'WebP',
};

/** 76 bytes, 12.5 KB, 3.2 MB: as the message box's chips say it (app.js). */
export function sizeInWords(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** Thumbnails, each a link to the full image; loaded lazily, so a long history fetches only what is seen. */
export function TurnImages(p: {
  conversationId: string;
  turnId: string;
  images: ReadonlyArray<{ media_type: string; size: number }>;
}) {
  return (
    <ul class="plain turn-images" aria-label="Images sent">
      {p.images.map((img, i) => {
        const url = webImagePath(p.conversationId, p.turnId, i);
        const words = `Image ${i + 1}: ${TYPE_WORDS[img.media_type] ?? img.media_type}, ${sizeInWords(img.size)}`;
        return (
          <li>
            <a href={url} target="_blank" rel="noopener" title={words}>
              <img class="thumb" src={url} alt={words} loading="lazy" />
            </a>
          </li>
        );
      })}
    </ul>
  );
}

/** GET an image of a turn of the signed-in account's conversation (the signed-in check is app.tsx's). */
export function turnImageRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  app.get('/conversations/:id/turns/:turnId/images/:position', async (c) => {
    const position = c.req.param('position');
    const at = /^\d{1,2}$/.test(position) ? Number(position) : -1;
    const r = await deps.engine.image(c.get('user').account.id, c.req.param('id'), c.req.param('turnId'), at);
    if (!r.ok) return c.text('image not found', 404);
    return c.body(new Uint8Array(r.value.bytes), 200, {
      'content-type': r.value.mediaType,
      'content-length': String(r.value.bytes.length),
      // A turn's image never changes; only this browser's session may keep it.
      'cache-control': 'private, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
      // Opened on its own, it is shown, never run (an image type is all it can be, but say so).
      'content-security-policy': "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'",
    });
  });
  return app;
}
