/**
 * The one JSON body parser of every route `serve` answers over HTTP (the
 * blog API at each mount, the relay's /api/auth/*): Fastify's own, behind a
 * scan of the body's bytes as they arrive that refuses nesting past
 * MAX_JSON_DEPTH. A body of half a million `[` costs JSON.parse and then the
 * schema validator far more than a flat body of the same size, and no route
 * takes more than a few levels. The scan is linear, runs on each chunk as it
 * comes (before anything is kept or parsed), and stops at the first level
 * too many: the request is answered 400 at once, and its connection is
 * closed (answer-closes.ts), so the rest of a refused body is never read.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/** No route's body is nested more than 3 levels; 32 leaves room and still bounds the work. */
export const MAX_JSON_DEPTH = 32;

/**
 * Where a scan of JSON text stands between chunks: how deep it is, whether inside a string, and whether the last
 * chunk ended on a backslash inside one (the next byte is escaped). The characters it looks for are ASCII, which in
 * UTF-8 never occur inside another character's bytes, so bytes are scanned as they came and no text is decoded.
 */
export class NestingScan {
  private depth = 0;
  private inString = false;
  private escaped = false;

  constructor(private readonly limit: number) {}

  /** Takes the next bytes; true once the text has opened more than `limit` arrays and objects inside one another. */
  exceeds(bytes: Uint8Array): boolean {
    let i = 0;
    if (this.escaped) {
      this.escaped = false;
      i = 1;
    }
    for (; i < bytes.length; i++) {
      const c = bytes[i]!;
      if (this.inString) {
        if (c === 0x5c) {
          // backslash: the next byte is escaped, whatever it is, in this chunk or the next
          if (++i >= bytes.length) this.escaped = true;
        } else if (c === 0x22) this.inString = false;
      } else if (c === 0x22) this.inString = true;
      else if (c === 0x5b || c === 0x7b) {
        if (++this.depth > this.limit) return true;
      } else if (c === 0x5d || c === 0x7d) this.depth--;
    }
    return false;
  }
}

/** Whether `text` opens more than `limit` arrays and objects inside one another (brackets inside strings do not count). */
export function jsonNestingExceeds(text: string | Uint8Array, limit: number): boolean {
  return new NestingScan(limit).exceeds(typeof text === 'string' ? Buffer.from(text, 'utf8') : text);
}

/** A 400 that every error mapper already knows as a JSON body it cannot take (INVALID_JSON, or the blog's VALIDATION_ERROR). */
function tooDeep(): Error {
  return Object.assign(new Error(`the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels (arrays and objects inside one another)`), {
    statusCode: 400,
    code: 'FST_ERR_CTP_INVALID_JSON_BODY',
  });
}

/**
 * The body's bytes passed on unchanged, until they nest too deep: then the stream fails with the 400 above. It reads
 * its source only when it is read itself, so that nothing is scanned (and no failure raised) before the parser reads
 * the body: the hooks after this one (a route's token check) run while the body waits.
 */
class DepthGuard extends Readable {
  private readonly scan = new NestingScan(MAX_JSON_DEPTH);

  constructor(private readonly source: Readable) {
    super();
    source.pause();
    source.on('data', (chunk: Buffer) => {
      if (this.destroyed) return;
      if (this.scan.exceeds(chunk)) {
        source.pause();
        this.destroy(tooDeep());
      } else if (!this.push(chunk)) source.pause();
    });
    source.on('end', () => this.push(null));
    source.on('error', (error) => this.destroy(error));
  }

  override _read(): void {
    this.source.resume();
  }
}

/** `application/json` and `application/*+json`, with or without parameters: the bodies the JSON parser takes. */
function isJson(contentType: string | undefined): boolean {
  const essence = contentType?.split(';', 1)[0]!.trim().toLowerCase() ?? '';
  return essence === 'application/json' || (essence.startsWith('application/') && essence.endsWith('+json'));
}

/** Replaces the app's application/json parser; plugins registered after it (every route of serve) inherit it. */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  // As bytes: the default parser decodes what it takes (secure-json-parse reads Buffers).
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => parse(request, body as Buffer as unknown as string, done));
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (!isJson(request.headers['content-type'])) return payload;
    return new DepthGuard(payload);
  });
}
