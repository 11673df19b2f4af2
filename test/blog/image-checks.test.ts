/**
 * Images past their header (issue 39, item 13): a 68-byte PNG claiming
 * 60000x60000, a 41-byte truncated JPEG claiming 65500x65500 and a 200 KB
 * PNG that inflates to 200 MB were accepted and served. Now the file's
 * structure must be whole and its size within 8192 pixels a side and 40
 * megapixels, checked without decoding it. Real uploads to a listening serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeflate } from 'node:zlib';
import { FormData, request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { jpeg, png, pngChunk, webp } from '../helpers/images.js';

let running: RunningServe;
beforeAll(async () => {
  running = await startTestServe();
});
afterAll(async () => {
  await running.close();
});

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
function ihdr(width: number, height: number, colour: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8;
  header[9] = colour;
  return pngChunk('IHDR', header);
}

/** Deflates `total` zero bytes a megabyte at a time (never 200 MB in memory at once). */
async function deflatedZeros(total: number): Promise<Buffer> {
  const deflate = createDeflate({ level: 9 });
  const out: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => out.push(chunk));
  const done = new Promise((resolve) => deflate.on('end', resolve));
  const chunk = Buffer.alloc(1024 * 1024);
  for (let left = total; left > 0; left -= chunk.length) {
    if (!deflate.write(left >= chunk.length ? chunk : chunk.subarray(0, left))) await new Promise((resolve) => deflate.once('drain', resolve));
  }
  deflate.end();
  await done;
  return Buffer.concat(out);
}

async function upload(bytes: Buffer, type: string, name: string) {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type }), name);
  const res = await request(`${running.url}/api/v2/upload/image`, { method: 'POST', headers: { authorization: `Bearer ${running.adminToken}` }, body: form });
  return { status: res.statusCode, body: (await res.body.json()) as any };
}

describe('images checked past their header', () => {
  it('refuses a 68-byte PNG claiming 60000x60000', async () => {
    const file = Buffer.concat([SIGNATURE, ihdr(60000, 60000, 2), pngChunk('IDAT', Buffer.alloc(11)), pngChunk('IEND', Buffer.alloc(0))]);
    expect(file.length).toBe(68);
    const res = await upload(file, 'image/png', 'huge.png');
    expect(res.status).toBe(422);
    expect(res.body).toEqual({
      error: 'Unprocessable Content',
      code: 'IMAGE_TOO_LARGE',
      detail: expect.stringContaining('60000x60000 pixels: at most 8192 a side and 40 megapixels'),
    });
  });

  it('refuses a 41-byte truncated JPEG claiming 65500x65500', async () => {
    const whole = jpeg(65500, 65500);
    const file = Buffer.concat([whole.subarray(0, whole.length - 2), Buffer.from([0xff, 0xc4])]);
    expect(file.length).toBe(41);
    const res = await upload(file, 'image/jpeg', 'cut.jpg');
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'INVALID_IMAGE', detail: expect.stringContaining('the JPEG is truncated') });
  });

  it('refuses a 200 KB PNG that inflates to 200 MB, by its pixel count', async () => {
    // 7072x7072 RGBA: 200 MB of scanlines, 50 megapixels.
    const side = 7072;
    const idat = await deflatedZeros(side * (1 + side * 4));
    const file = Buffer.concat([SIGNATURE, ihdr(side, side, 6), pngChunk('IDAT', idat), pngChunk('IEND', Buffer.alloc(0))]);
    expect(file.length).toBeLessThan(300 * 1024);
    const res = await upload(file, 'image/png', 'bomb.png');
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'IMAGE_TOO_LARGE', detail: expect.stringContaining('7072x7072') });
  }, 30_000);

  it('refuses PNGs cut short or without IEND, and a WebP whose RIFF size lies', async () => {
    const good = png(16, 16);
    for (const [bytes, message] of [
      [good.subarray(0, good.length - 12), 'does not end with an IEND chunk'],
      [good.subarray(0, good.length - 20), 'runs past the end of the file'],
      [Buffer.concat([good, Buffer.from('trailing')]), 'bytes after its IEND chunk'],
    ] as const) {
      const res = await upload(bytes, 'image/png', 'cut.png');
      expect(res.status, message).toBe(422);
      expect(res.body.detail).toContain(message);
    }
    const lying = webp(64, 64);
    lying.writeUInt32LE(lying.readUInt32LE(4) + 1000, 4);
    const res = await upload(lying, 'image/webp', 'cut.webp');
    expect(res.status).toBe(422);
    expect(res.body.detail).toContain('the WebP is truncated');
  });

  it('still takes good small images, and one at the bound', async () => {
    for (const [bytes, type] of [
      [png(64, 48), 'image/png'],
      [jpeg(640, 480), 'image/jpeg'],
      [webp(1920, 1080), 'image/webp'],
      [jpeg(8192, 4096), 'image/jpeg'],
    ] as const) {
      const res = await upload(bytes, type, 'good');
      expect(res.status, type).toBe(200);
    }
  });
});
