import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formImages, imageFields } from './form-images.ts';
import { GIF_1x1, PNG_3x2 } from '../../../test/fixtures/images.ts';

const url = (type: string, b: Buffer) => `data:${type};base64,${b.toString('base64')}`;

describe("the message box's images", () => {
  it('reads one field, many, or none', () => {
    assert.deepEqual(imageFields.parse(undefined), []);
    assert.deepEqual(imageFields.parse('a'), ['a']);
    assert.deepEqual(imageFields.parse(['a', 'b']), ['a', 'b']);
  });
  it('decodes data URLs into the checked images', () => {
    const r = formImages([url('image/png', PNG_3x2), url('image/gif', GIF_1x1)]);
    assert.ok(r.ok);
    assert.deepEqual(
      r.value.map((i) => i.mediaType),
      ['image/png', 'image/gif'],
    );
    assert.deepEqual(r.value[0]!.bytes, PNG_3x2);
  });
  it('refuses in words, as the API does', () => {
    assert.deepEqual(formImages(['not a data url']), {
      ok: false,
      status: 422,
      message: 'Image 1 could not be read as an image; add it again.',
    });
    assert.deepEqual(formImages([url('image/png', GIF_1x1)]), {
      ok: false,
      status: 422,
      message: 'Image 1 is declared image/png but its bytes are image/gif.',
    });
    const eleven = Array.from({ length: 11 }, () => url('image/png', PNG_3x2));
    const many = formImages(eleven);
    assert.ok(!many.ok && many.status === 422 && /^At most 10 images/.test(many.message));
    const big = formImages([`data:image/png;base64,${'A'.repeat(14_000_000)}`]);
    assert.ok(
      !big.ok && big.status === 413 && /^Image 1 is 10\.0 MB; each image may be at most 10 MB\.$/.test(big.message),
    );
    assert.ok(!formImages([url('text/plain', Buffer.from('hi'))]).ok);
  });
});
