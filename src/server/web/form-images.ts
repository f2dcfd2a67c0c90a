/**
 * Images the conversation page's message box sends: each a `data:<type>;base64,…` URL in a repeated
 * `image` form field (forms here are url-encoded, never multipart), checked as the API checks its images.
 */
import { z } from 'zod';
import { decodeImages, type DecodedImage } from '../conversations/prompt-images.ts';

/** One field or many: url-encoded forms repeat the name; absent means none. */
export const imageFields = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]));

const DATA_URL = /^data:([a-z0-9.+/-]{1,100});base64,/i;

/** A sentence as the page shows it: the checks' words start in lower case (the API's style). */
const sentence = (s: string): string => `${s.charAt(0).toUpperCase()}${s.slice(1)}.`;

/**
 * The form's images decoded and checked (count, type by their bytes, 10 MB each), or the refusal in
 * words with its status (413 for an image too large, 422 otherwise).
 */
export function formImages(
  fields: readonly string[],
): { ok: true; value: DecodedImage[] } | { ok: false; status: number; message: string } {
  const input: Array<{ data: string; media_type: string }> = [];
  for (const [i, f] of fields.entries()) {
    const m = DATA_URL.exec(f);
    if (!m) return { ok: false, status: 422, message: `Image ${i + 1} could not be read as an image; add it again.` };
    input.push({ media_type: m[1]!, data: f.slice(m[0].length) });
  }
  const r = decodeImages(input);
  if (r.ok) return r;
  return { ok: false, status: r.error.code === 'image_too_large' ? 413 : 422, message: sentence(r.error.message) };
}
