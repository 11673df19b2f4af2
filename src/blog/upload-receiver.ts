/**
 * How an upload's body is read: each file part streamed to a temporary file
 * (never held whole in memory), at most MAX_UPLOADS_IN_FLIGHT uploads at
 * once over the whole server (503 with Retry-After beyond, before any byte
 * of the body is read) and MAX_UPLOADS_PER_ACCOUNT of one account (429:
 * one account cannot take every place and leave the others 503, nor send
 * the whole server's upload bandwidth), and a body that stops arriving for
 * UPLOAD_IDLE_TIMEOUT_MS dropped with its connection. Temporary files go
 * when the request ends, whatever way it ends.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { RETRY_AFTER_SECONDS } from '../http/errors.js';
import { ApiError, invalidFields } from './api-error.js';
import { MAX_IMAGE_BYTES } from './uploads.js';

/** Uploads read at once by one serve: with 10 files of 5 MB each, at most 800 MB of temporary files. */
export const MAX_UPLOADS_IN_FLIGHT = 16;
/** How long an upload's body may send nothing before it is dropped. */
export const UPLOAD_IDLE_TIMEOUT_MS = 10_000;
/** As long as the 503 of an unreachable database says: one documented Retry-After. */
const UPLOAD_RETRY_AFTER_SECONDS = RETRY_AFTER_SECONDS;

/** Uploads one account (or the admin token) may have read at once: a quarter of the server's places. */
const MAX_UPLOADS_PER_ACCOUNT = 4;

/** Counts uploads in flight, in all and per account; `enter` refuses past either cap. */
export class UploadGate {
  private inFlight = 0;
  private readonly byAccount = new Map<string, number>();
  constructor(
    readonly most: number = MAX_UPLOADS_IN_FLIGHT,
    readonly perAccount: number = MAX_UPLOADS_PER_ACCOUNT,
  ) {}

  /** A release to call once the upload is over; throws a 429 past the account's places, a 503 past the server's. */
  enter(account: string): () => void {
    const own = this.byAccount.get(account) ?? 0;
    if (own >= this.perAccount) {
      throw new ApiError(
        429,
        'TOO_MANY_UPLOADS',
        'Too Many Requests',
        `this account has ${this.perAccount} uploads in progress already (at most ${this.perAccount} at once); try again once one has finished`,
        { 'retry-after': String(UPLOAD_RETRY_AFTER_SECONDS) },
      );
    }
    if (this.inFlight >= this.most) {
      throw new ApiError(
        503,
        'UPLOADS_BUSY',
        'Service Unavailable',
        `the server is receiving ${this.most} uploads already; try again in ${UPLOAD_RETRY_AFTER_SECONDS} s`,
        { 'retry-after': String(UPLOAD_RETRY_AFTER_SECONDS) },
      );
    }
    this.inFlight++;
    this.byAccount.set(account, own + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      const left = (this.byAccount.get(account) ?? 1) - 1;
      if (left > 0) this.byAccount.set(account, left);
      else this.byAccount.delete(account);
    };
  }
}

export interface ReceivedFile {
  name: string;
  path: string;
}

/** The file parts of an upload, each in a temporary file; `files` are read back one at a time with `bytesOf`. */
export class ReceivedUpload {
  readonly files: ReceivedFile[] = [];
  private constructor(readonly directory: string) {}

  static async open(): Promise<ReceivedUpload> {
    return new ReceivedUpload(await mkdtemp(join(tmpdir(), 'miniapp-upload-')));
  }

  bytesOf(file: ReceivedFile): Promise<Buffer> {
    return readFile(file.path);
  }

  async dispose(): Promise<void> {
    await rm(this.directory, { recursive: true, force: true });
  }
}

/**
 * Reads the multipart body of `request` into `upload`: the file parts named `field`, each streamed to disk.
 * A body that sends nothing for `idleMs` is destroyed with its connection (the read then fails).
 */
export async function receiveFileParts(request: FastifyRequest, upload: ReceivedUpload, field: string, most: number, idleMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      request.log.info({ idleMs }, 'upload body idle: connection dropped');
      request.raw.destroy();
    }, idleMs);
  };
  request.raw.on('data', arm);
  arm();
  try {
    for await (const part of request.parts({ limits: { files: most, fileSize: MAX_IMAGE_BYTES } })) {
      if (part.type !== 'file') continue;
      if (part.fieldname !== field) {
        part.file.resume();
        throw invalidFields({ [part.fieldname]: [`unexpected file part "${part.fieldname}"; send images in the part "${field}"`] });
      }
      const path = join(upload.directory, String(upload.files.length));
      upload.files.push({ name: part.filename, path });
      await pipeline(part.file, createWriteStream(path, { mode: 0o600 }));
      if (part.file.truncated) {
        const error = Object.assign(new Error('file too large'), { code: 'FST_REQ_FILE_TOO_LARGE' });
        throw error;
      }
    }
  } finally {
    clearTimeout(timer);
    request.raw.off('data', arm);
  }
}
