/**
 * The one JSON body parser of every route `serve` answers over HTTP (the
 * blog API at each mount, the relay's /api/auth/*): Fastify's own, behind a
 * scan of the body's bytes as they arrive that refuses nesting past
 * MAX_JSON_DEPTH. A body of half a million `[` costs JSON.parse and then the
 * schema validator far more than a flat body of the same size, and no route
 * takes more than a few levels. The scan is linear, runs on each chunk as it
 * comes (before anything is kept or parsed), and stops at the first level
 * too many: the request is answered 400 at once, and its connection is
 * closed (unread-bodies.ts), so the rest of a refused body is never read.
 *
 * The text must be Unicode, as gRPC's strings must: bytes that are not UTF-8
 * (which a lenient decoder turns into U+FFFD, stored as such) and escapes of
 * a lone surrogate (`"\ud800"`, valid JSON grammar but no character) are
 * refused, naming where. Every refusal of a body that is not JSON is the
 * one error `INVALID_JSON` (400) on every surface, its detail saying what is
 * wrong and where, never quoting the text (it may hold a password).
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { jsonSyntaxProblem } from '../json-syntax.js';

/** No route's body is nested more than 3 levels; 32 leaves room and still bounds the work. */
export const MAX_JSON_DEPTH = 32;

/**
 * Where a scan of JSON text stands between chunks: how deep it is, whether inside a string, and whether the last
 * chunk ended on a backslash inside one (the next byte is escaped). The characters it looks for are ASCII, which in
 * UTF-8 never occur inside another character's bytes, so bytes are scanned as they came and no text is decoded.
 */
class NestingScan {
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

/** The code of every JSON body refused here: each surface's error mapper answers it 400 INVALID_JSON. */
const INVALID_JSON_BODY = 'FST_ERR_CTP_INVALID_JSON_BODY';

/** A 400 that every error mapper knows as a JSON body it cannot take (INVALID_JSON). */
function invalidJson(message: string): Error {
  return Object.assign(new Error(message), { statusCode: 400, code: INVALID_JSON_BODY });
}

function tooDeep(): Error {
  return invalidJson(`the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels (arrays and objects inside one another)`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Where `bytes` stop being UTF-8: the offset of the first byte a lenient decoder replaced with U+FFFD (a U+FFFD
 * that was sent as its own three bytes is text, not a replacement).
 */
function firstInvalidUtf8(bytes: Uint8Array): number {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  let offset = 0;
  for (const character of text) {
    const code = character.codePointAt(0)!;
    if (code === 0xfffd && !(bytes[offset] === 0xef && bytes[offset + 1] === 0xbf && bytes[offset + 2] === 0xbd)) return offset;
    offset += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return offset;
}

/** A JSON escape of a surrogate (\uD800 to \uDFFF): only a text that has one can hold a lone one. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The place (`title`, `tags[2]`, `body`) of the first string, key or value, in `value` that holds a lone surrogate. */
function loneSurrogateAt(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return LONE_SURROGATE.test(value) ? path || 'body' : undefined;
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = loneSurrogateAt(item, `${path}[${index}]`);
      if (found) return found;
    }
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      if (LONE_SURROGATE.test(key)) return `a key in ${path || 'the body'}`;
      const found = loneSurrogateAt(item, at);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * The longest body whose syntax error is placed by searching (a few milliseconds of parsing; a post's 595 KiB would
 * take 80): every body but a post's is shorter, and a post that long is told what is wrong without where.
 */
const SYNTAX_SEARCH_LIMIT = 64 * 1024;

type Parse = (request: unknown, body: string, done: (error: Error | null, value?: unknown) => void) => void;

/**
 * Fastify's JSON parser (its guard against `__proto__` and `constructor` keys) over the body's bytes decoded as
 * strict UTF-8, with its refusals made precise: what is wrong and where.
 */
function strictJson(parse: Parse): (request: unknown, body: Buffer, done: (error: Error | null, value?: unknown) => void) => void {
  return (request, body, done) => {
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      done(invalidJson(`the body is not valid UTF-8 (at byte offset ${firstInvalidUtf8(body)}): JSON text must be UTF-8`));
      return;
    }
    parse(request, text, (error, value) => {
      if (error) {
        const code = (error as { code?: string }).code;
        if (code !== INVALID_JSON_BODY) done(error);
        else {
          let problem: string;
          try {
            JSON.parse(text);
            // Parsed by JSON.parse, refused by the guard: a key that would change an object's prototype.
            problem = 'it has a __proto__ or constructor.prototype key, which no route takes';
          } catch (syntax) {
            problem = jsonSyntaxProblem(text, syntax, SYNTAX_SEARCH_LIMIT);
          }
          done(invalidJson(`the body is not valid JSON: ${problem}`));
        }
        return;
      }
      const lone = SURROGATE_ESCAPE.test(text) ? loneSurrogateAt(value) : undefined;
      if (lone) done(invalidJson(`${lone} holds a lone surrogate escape (\\uD800 to \\uDFFF without its pair): JSON strings must be Unicode text`));
      else done(null, value);
    });
  };
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
  const essence = contentType?.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return essence === 'application/json' || (essence.startsWith('application/') && essence.endsWith('+json'));
}

/** Replaces the app's application/json parser; plugins registered after it (every route of serve) inherit it. */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = strictJson(app.getDefaultJsonParser('error', 'error') as unknown as Parse);
  app.removeContentTypeParser('application/json');
  // As bytes, decoded here: a lenient decoder would take bytes that are not UTF-8 as U+FFFD.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => parse(request, body as Buffer, done));
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (!isJson(request.headers['content-type'])) return payload;
    return new DepthGuard(payload);
  });
}
