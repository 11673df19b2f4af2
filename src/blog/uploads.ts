/**
 * Image uploads: JPEG, PNG or WebP recognised by their bytes (image-size
 * reads the header; the declared content type is not trusted), stored
 * content-addressed under the data dir, written atomically.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { imageSize } from 'image-size';

export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
export const MAX_IMAGES = 10;
const KINDS: Record<string, { ext: string; mime: string }> = {
  jpg: { ext: 'jpg', mime: 'image/jpeg' },
  png: { ext: 'png', mime: 'image/png' },
  webp: { ext: 'webp', mime: 'image/webp' },
};

export interface StoredImage {
  name: string;
  width: number;
  height: number;
  size: number;
  mime: string;
}

/** What kind of image the bytes are, or undefined for anything but JPEG, PNG and WebP. */
export function recogniseImage(bytes: Buffer): { ext: string; mime: string; width: number; height: number } | undefined {
  let info;
  try {
    info = imageSize(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch {
    return undefined;
  }
  const kind = info.type ? KINDS[info.type] : undefined;
  if (!kind || !info.width || !info.height) return undefined;
  return { ...kind, width: info.width, height: info.height };
}

export class ImageStore {
  constructor(readonly directory: string) {
    mkdirSync(directory, { recursive: true, mode: 0o700 });
  }

  /** Stores a recognised image under the SHA-256 of its bytes; the same bytes are stored once. */
  save(bytes: Buffer): StoredImage | undefined {
    const kind = recogniseImage(bytes);
    if (!kind) return undefined;
    const name = `${createHash('sha256').update(bytes).digest('hex')}.${kind.ext}`;
    const path = join(this.directory, name);
    if (!existsSync(path)) {
      const temporary = join(this.directory, `.${name}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(temporary, bytes, { mode: 0o644 });
      renameSync(temporary, path);
    }
    return { name, width: kind.width, height: kind.height, size: bytes.length, mime: kind.mime };
  }
}
