/**
 * Images sent with a prompt: the body's shape, the limits (10 per prompt, 10 MB each, PNG/JPEG/GIF/WebP
 * told by their magic bytes), and the reference a turn keeps of each (its blob digest, type and size).
 */
import { z } from '@hono/zod-openapi';

import { IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGES, sniffImage, type ImageType } from '../../wire/images.ts';

export { IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGES, sniffImage, type ImageType };

/** An image as a request carries it (upstream's shape): base64 bytes and the declared type. */
export const ImageInputSchema = z
  .object({
    data: z.string().openapi({ description: 'The image bytes, base64 (at most 10 MB decoded)' }),
    media_type: z.string().max(100).openapi({ description: 'image/png, image/jpeg, image/gif or image/webp' }),
  })
  .openapi('PromptImage');

/** Checked one by one below (each failure has its own code), so the schema only bounds the array's size. */
export const ImagesField = z
  .array(ImageInputSchema)
  .max(1000)
  .optional()
  .openapi({ description: `At most ${MAX_IMAGES} images; each checked by its magic bytes` });

/** What a turn keeps of one of its images; the bytes are in the blob store under the digest. */
export const ImageRefSchema = z.object({
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  media_type: z.enum(IMAGE_TYPES),
  size: z.number().int().min(0),
});
export type ImageRef = z.infer<typeof ImageRefSchema>;

export interface DecodedImage {
  readonly mediaType: ImageType;
  readonly bytes: Buffer;
}

export type ImageRefusalCode = 'too_many_images' | 'image_too_large' | 'unsupported_image_type' | 'invalid_image';

export interface ImageRefusal {
  readonly code: ImageRefusalCode;
  readonly message: string;
  readonly index?: number;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** `image/jpg` is what some clients call JPEG. */
const declared = (t: string): string => {
  const v = t.trim().toLowerCase();
  return v === 'image/jpg' ? 'image/jpeg' : v;
};

/**
 * The images decoded and checked, or the first refusal. The count is checked before anything is decoded;
 * the size before the bytes are (from the base64 length), so an oversized image is never held decoded.
 */
export function decodeImages(
  input: ReadonlyArray<{ data: string; media_type: string }> | undefined,
): { ok: true; value: DecodedImage[] } | { ok: false; error: ImageRefusal } {
  const list = input ?? [];
  if (list.length > MAX_IMAGES)
    return {
      ok: false,
      error: {
        code: 'too_many_images',
        message: `at most ${MAX_IMAGES} images go with one message; ${list.length} were sent`,
      },
    };
  const out: DecodedImage[] = [];
  for (const [i, img] of list.entries()) {
    const n = i + 1;
    const type = declared(img.media_type);
    if (!(IMAGE_TYPES as readonly string[]).includes(type))
      return {
        ok: false,
        error: {
          code: 'unsupported_image_type',
          index: i,
          message: `image ${n} is ${JSON.stringify(img.media_type.slice(0, 100))}; send PNG, JPEG, GIF or WebP`,
        },
      };
    const data = img.data.replace(/\s+/g, '');
    // Three bytes for every four characters, less the padding: the decoded size without decoding.
    const size = Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
    if (size > MAX_IMAGE_BYTES)
      return {
        ok: false,
        error: {
          code: 'image_too_large',
          index: i,
          message: `image ${n} is ${(size / 1024 / 1024).toFixed(1)} MB; each image may be at most ${MAX_IMAGE_BYTES / 1024 / 1024} MB`,
        },
      };
    if (data.length === 0 || data.length % 4 !== 0 || !BASE64.test(data))
      return { ok: false, error: { code: 'invalid_image', index: i, message: `image ${n} is not base64` } };
    const bytes = Buffer.from(data, 'base64');
    const sniffed = sniffImage(bytes);
    if (sniffed === null)
      return {
        ok: false,
        error: {
          code: 'unsupported_image_type',
          index: i,
          message: `image ${n} is not a PNG, JPEG, GIF or WebP image (its bytes say otherwise, whatever its type)`,
        },
      };
    if (sniffed !== type)
      return {
        ok: false,
        error: {
          code: 'unsupported_image_type',
          index: i,
          message: `image ${n} is declared ${type} but its bytes are ${sniffed}`,
        },
      };
    out.push({ mediaType: sniffed, bytes });
  }
  return { ok: true, value: out };
}

/** The words for a runtime that did not advertise images (`promptCapabilities.image`). */
export const noImagesWords = (runtime: string): string =>
  `the ${runtime} runtime does not take images (its agent does not advertise image prompts); send the message without them`;

/** An image of a turn as the API shows it: where its bytes are fetched (with the same key), never the bytes. */
export const TurnImageViewSchema = z
  .object({
    position: z.number().int().openapi({ description: 'Its place in the prompt, from 0' }),
    media_type: z.string(),
    size: z.number().int().openapi({ description: 'Bytes' }),
    url: z.string().openapi({ description: 'GET it (authorized) for the bytes' }),
  })
  .openapi('TurnImage');
export type TurnImageView = z.infer<typeof TurnImageViewSchema>;

export const imagePath = (conversationId: string, turnId: string, position: number): string =>
  `/api/conversations/${conversationId}/turns/${turnId}/images/${position}`;

export function turnImagesView(
  conversationId: string,
  turnId: string,
  images: ReadonlyArray<{ media_type: string; size: number }>,
): TurnImageView[] {
  return images.map((img, position) => ({
    position,
    media_type: img.media_type,
    size: img.size,
    url: imagePath(conversationId, turnId, position),
  }));
}
