/**
 * What the demo agent says of the images in a prompt (type, size, and a PNG's, GIF's or JPEG's pixel size),
 * so a test sees that each arrived whole; and whether it takes images at all (DEMO_AGENT_IMAGES=off: no).
 */
import type { ContentBlock } from '@agentclientprotocol/sdk';

/** The demo agent advertises image prompts unless its env says otherwise (a runtime that takes none, for tests). */
export const demoTakesImages = (env: NodeJS.ProcessEnv = process.env): boolean => env.DEMO_AGENT_IMAGES !== 'off';

function pixels(type: string, b: Buffer): string | null {
  if (type === 'image/png' && b.length >= 24) return `${b.readUInt32BE(16)}×${b.readUInt32BE(20)} px`;
  if (type === 'image/gif' && b.length >= 10) return `${b.readUInt16LE(6)}×${b.readUInt16LE(8)} px`;
  if (type === 'image/jpeg') {
    // The first start-of-frame marker holds the height and width.
    for (let i = 2; i + 9 < b.length; ) {
      if (b[i] !== 0xff) return null;
      const marker = b[i + 1]!;
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc)
        return `${b.readUInt16BE(i + 7)}×${b.readUInt16BE(i + 5)} px`;
      i += 2 + b.readUInt16BE(i + 2);
    }
  }
  return null;
}

/** One line per image ("Image 1: image/png, 68 bytes, 1×1 px"), or null when the prompt has none. */
export function describeImages(prompt: readonly ContentBlock[]): string | null {
  const images = prompt.filter((b): b is Extract<ContentBlock, { type: 'image' }> => b.type === 'image');
  if (images.length === 0) return null;
  const lines = images.map((img, i) => {
    const bytes = Buffer.from(img.data, 'base64');
    const px = pixels(img.mimeType, bytes);
    return `Image ${i + 1}: ${img.mimeType}, ${bytes.length} bytes${px ? `, ${px}` : ''}`;
  });
  return `I received ${images.length} image${images.length === 1 ? '' : 's'}.\n${lines.join('\n')}`;
}
