/**
 * Image uploads: JPEG, PNG or WebP recognised by their bytes (image-size
 * reads the header; the declared content type is not trusted), stored
 * content-addressed (the name is the SHA-256 of the bytes, so the same
 * bytes are stored once and a name never changes its bytes).
 *
 * Where they live follows the store: files in the SQLite data dir, written
 * atomically; in PostgreSQL, bytes in the images table, so that every
 * instance serves every image; a temporary directory for the memory store.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { imageSize as ImageSize } from 'image-size';
import type { Sql } from '../store/sql.js';
import type { Store } from '../store/store.js';

export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
export const MAX_IMAGES = 10;
const KINDS: Record<string, { ext: string; mime: string }> = {
  jpg: { ext: 'jpg', mime: 'image/jpeg' },
  png: { ext: 'png', mime: 'image/png' },
  webp: { ext: 'webp', mime: 'image/webp' },
};
const MIME_BY_EXT = Object.fromEntries(Object.values(KINDS).map((kind) => [kind.ext, kind.mime]));

/** The only names an image can have; anything else is not looked up at all (no path ever reaches the disk). */
const IMAGE_NAME = /^[0-9a-f]{64}\.(jpg|png|webp)$/;

export interface StoredImage {
  name: string;
  width: number;
  height: number;
  size: number;
  mime: string;
}

/** A stored image as served: its bytes only when asked for (a HEAD request needs none). */
interface ImageFile {
  name: string;
  mime: string;
  size: number;
  storedAt: Date;
  bytes?: Buffer;
}

export interface ImageStore {
  /** Stores a recognised image under the SHA-256 of its bytes; undefined when the bytes are no image we take. */
  save(bytes: Buffer): Promise<StoredImage | undefined>;
  /** The image called `name`, or undefined. */
  find(name: string, options?: { bytes?: boolean }): Promise<ImageFile | undefined>;
  close(): Promise<void>;
}

/** image-size, loaded at the first image to recognise rather than when serve starts (it is 26 modules). */
let imageSize: typeof ImageSize | undefined;
const requireCjs = createRequire(import.meta.url);

/** What kind of image the bytes are, or undefined for anything but JPEG, PNG and WebP. */
export function recogniseImage(bytes: Buffer): { ext: string; mime: string; width: number; height: number } | undefined {
  let info;
  try {
    imageSize ??= (requireCjs('image-size') as { imageSize: typeof ImageSize }).imageSize;
    info = imageSize(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch {
    return undefined;
  }
  const kind = info.type ? KINDS[info.type] : undefined;
  if (!kind || !info.width || !info.height) return undefined;
  return { ...kind, width: info.width, height: info.height };
}

/** The largest image taken: 8192 pixels a side and 40 megapixels (the spec recommends at most 1920x1080). */
const MAX_IMAGE_SIDE = 8192;
const MAX_IMAGE_PIXELS = 40_000_000;

/** Why a PNG's chunks do not add up to the file, or undefined: IHDR first, every length inside the file, IEND last and at its end. */
function pngProblem(bytes: Buffer): string | undefined {
  let offset = 8;
  let first = true;
  while (offset + 12 <= bytes.length) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    if (length > 0x7fffffff || offset + 12 + length > bytes.length) return `its ${type} chunk runs past the end of the file: the PNG is truncated`;
    if (first && type !== 'IHDR') return 'it does not start with an IHDR chunk';
    first = false;
    offset += 12 + length;
    if (type === 'IEND') return offset === bytes.length ? undefined : 'it has bytes after its IEND chunk';
  }
  return 'it does not end with an IEND chunk: the PNG is truncated';
}

/** Why a JPEG's segments do not add up to the file, or undefined: a start of frame, then scans, and the end-of-image marker (FF D9) last. */
function jpegProblem(bytes: Buffer): string | undefined {
  let offset = 2;
  let frame = false;
  while (offset < bytes.length) {
    if (bytes[offset] !== 0xff) return `a segment does not start with a marker at byte ${offset}`;
    while (bytes[offset] === 0xff) offset++; // fill bytes
    const marker = bytes[offset++];
    if (marker === undefined) break;
    if (marker === 0xd9) {
      if (!frame) return 'it has no start-of-frame segment';
      return offset === bytes.length ? undefined : 'it has bytes after its end-of-image marker';
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue; // markers without a length
    if (offset + 2 > bytes.length) break;
    const length = bytes.readUInt16BE(offset);
    if (length < 2 || offset + length > bytes.length) break;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) frame = true;
    offset += length;
    if (marker === 0xda) {
      // Entropy-coded data up to the next marker that is neither a stuffed 00 nor a restart marker.
      while (offset + 1 < bytes.length && !(bytes[offset] === 0xff && bytes[offset + 1] !== 0x00 && (bytes[offset + 1]! < 0xd0 || bytes[offset + 1]! > 0xd7)))
        offset++;
      if (offset + 1 >= bytes.length) break;
    }
  }
  return 'it does not end with an end-of-image marker (FF D9): the JPEG is truncated';
}

/** Why a WebP's RIFF container does not add up to the file, or undefined. */
function webpProblem(bytes: Buffer): string | undefined {
  if (bytes.readUInt32LE(4) + 8 !== bytes.length) return 'its RIFF size does not match the file: the WebP is truncated';
  let offset = 12;
  while (offset + 8 <= bytes.length) {
    const size = bytes.readUInt32LE(offset + 4);
    offset += 8 + size + (size % 2);
  }
  return offset === bytes.length ? undefined : 'its chunks run past the end of the file: the WebP is truncated';
}

/**
 * Checks an upload past its header, without decoding it: the structure of the file must be whole (a truncated
 * file is refused) and its size within MAX_IMAGE_SIDE and MAX_IMAGE_PIXELS (which also bounds what a small,
 * highly compressed file inflates to). Undefined when the bytes are no image we take at all.
 */
export function inspectImage(
  bytes: Buffer,
): { ok: true; kind: ReturnType<typeof recogniseImage> & object } | { ok: false; code: 'INVALID_IMAGE' | 'IMAGE_TOO_LARGE'; problem: string } | undefined {
  const kind = recogniseImage(bytes);
  if (!kind) return undefined;
  const problem = kind.ext === 'png' ? pngProblem(bytes) : kind.ext === 'jpg' ? jpegProblem(bytes) : webpProblem(bytes);
  if (problem) return { ok: false, code: 'INVALID_IMAGE', problem };
  if (kind.width > MAX_IMAGE_SIDE || kind.height > MAX_IMAGE_SIDE || kind.width * kind.height > MAX_IMAGE_PIXELS) {
    return {
      ok: false,
      code: 'IMAGE_TOO_LARGE',
      problem: `it is ${kind.width}x${kind.height} pixels: at most ${MAX_IMAGE_SIDE} a side and ${MAX_IMAGE_PIXELS / 1_000_000} megapixels are taken`,
    };
  }
  return { ok: true, kind };
}

function identify(bytes: Buffer): StoredImage | undefined {
  const kind = recogniseImage(bytes);
  if (!kind) return undefined;
  const name = `${createHash('sha256').update(bytes).digest('hex')}.${kind.ext}`;
  return { name, width: kind.width, height: kind.height, size: bytes.length, mime: kind.mime };
}

/** Files in a directory: the SQLite data dir's uploads/, or a temporary one. */
class FileImageStore implements ImageStore {
  constructor(
    readonly directory: string,
    private readonly onClose: () => void = () => undefined,
  ) {
    mkdirSync(directory, { recursive: true, mode: 0o700 });
  }

  async save(bytes: Buffer): Promise<StoredImage | undefined> {
    const image = identify(bytes);
    if (!image) return undefined;
    const path = join(this.directory, image.name);
    if (!existsSync(path)) {
      const temporary = join(this.directory, `.${image.name}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(temporary, bytes, { mode: 0o644 });
      renameSync(temporary, path);
    }
    return image;
  }

  async find(name: string, options: { bytes?: boolean } = {}): Promise<ImageFile | undefined> {
    if (!IMAGE_NAME.test(name)) return undefined;
    const path = join(this.directory, name);
    try {
      const info = await stat(path);
      const file: ImageFile = { name, mime: MIME_BY_EXT[name.slice(name.lastIndexOf('.') + 1)]!, size: info.size, storedAt: info.mtime };
      if (options.bytes !== false) file.bytes = await readFile(path);
      return file;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async close(): Promise<void> {
    this.onClose();
  }
}

/** Bytes in the images table (PostgreSQL): every instance serves what any instance stored. */
class DatabaseImageStore implements ImageStore {
  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async save(bytes: Buffer): Promise<StoredImage | undefined> {
    const image = identify(bytes);
    if (!image) return undefined;
    // Content-addressed: whichever instance stores these bytes first, the row is the same.
    await this.sql.run(
      `INSERT INTO images (name, mime, width, height, size, bytes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (name) DO NOTHING`,
      [image.name, image.mime, image.width, image.height, image.size, bytes, this.now().toISOString()],
    );
    return image;
  }

  async find(name: string, options: { bytes?: boolean } = {}): Promise<ImageFile | undefined> {
    if (!IMAGE_NAME.test(name)) return undefined;
    const withBytes = options.bytes !== false;
    const row = await this.sql.one<{ mime: string; size: number; created_at: string; bytes?: Buffer }>(
      `SELECT mime, size, created_at${withBytes ? ', bytes' : ''} FROM images WHERE name = $1`,
      [name],
    );
    if (!row) return undefined;
    const file: ImageFile = { name, mime: row.mime, size: Number(row.size), storedAt: new Date(row.created_at) };
    if (withBytes) file.bytes = row.bytes!;
    return file;
  }

  async close(): Promise<void> {}
}

/** The image store that goes with `store`. */
export function openImageStore(store: Store, now: () => Date = () => new Date()): ImageStore {
  if (store.kind === 'postgres') return new DatabaseImageStore(store.sql, now);
  if (store.dataDir) return new FileImageStore(join(store.dataDir, 'uploads'));
  const directory = mkdtempSync(join(tmpdir(), 'miniapp-uploads-'));
  return new FileImageStore(directory, () => rmSync(directory, { recursive: true, force: true }));
}
