/**
 * The one JSON body parser of every route `serve` answers over HTTP (the
 * blog API at each mount, the relay's /api/auth/*): Fastify's own, behind a
 * scan of the raw text that refuses nesting past MAX_JSON_DEPTH. A body of
 * half a million `[` costs JSON.parse and then the schema validator far more
 * than a flat body of the same size, and no route takes more than a few
 * levels; the scan is linear, stops at the first level too many, and runs
 * before anything is parsed.
 */
import type { FastifyInstance } from 'fastify';

/** No route's body is nested more than 3 levels; 32 leaves room and still bounds the work. */
export const MAX_JSON_DEPTH = 32;

/** Whether `text` opens more than `limit` arrays and objects inside one another (brackets inside strings do not count). */
export function jsonNestingExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped, whatever it is
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** A 400 that every error mapper already knows as a JSON body it cannot take (INVALID_JSON, or the blog's VALIDATION_ERROR). */
function tooDeep(): Error {
  return Object.assign(new Error(`the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels (arrays and objects inside one another)`), {
    statusCode: 400,
    code: 'FST_ERR_CTP_INVALID_JSON_BODY',
  });
}

/** Replaces the app's application/json parser; plugins registered after it (every route of serve) inherit it. */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (jsonNestingExceeds(body as string, MAX_JSON_DEPTH)) {
      done(tooDeep(), undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
