/**
 * GET and HEAD /uploads/NAME: the uploaded images, read from the image
 * store of serve's backend (files, or PostgreSQL's images table). A name is
 * the SHA-256 of the bytes, so an answer never changes: cached for a year
 * as immutable, its ETag the hash itself. Single byte ranges are served as
 * a static file server serves them; anything unknown is the usual 404 body.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ImageStore } from './uploads.js';

const IMAGE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

/** The one range `bytes=a-b`, `bytes=a-` or `bytes=-n` asks for; null when unsatisfiable, undefined when not a single range. */
function rangeOf(header: string, size: number): { start: number; end: number } | null | undefined {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) return null;
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
    if (start > end || start >= size) return null;
  }
  return { start, end };
}

function matchesEtag(header: string, etag: string): boolean {
  return header.split(',').some((candidate) => {
    const tag = candidate.trim();
    return tag === '*' || tag === etag || tag === `W/${etag}`;
  });
}

export async function imageRoute(app: FastifyInstance, options: { images: ImageStore }): Promise<void> {
  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    const { name } = request.params as { name: string };
    const head = request.method === 'HEAD';
    const range = head ? undefined : request.headers.range;
    const image = await options.images.find(name, { bytes: !head });
    if (!image) return reply.callNotFound();
    const etag = `"${name.slice(0, name.indexOf('.'))}"`;
    void reply
      .header('content-type', image.mime)
      .header('cache-control', IMAGE_CACHE_CONTROL)
      .header('etag', etag)
      .header('last-modified', image.storedAt.toUTCString())
      .header('accept-ranges', 'bytes')
      .header('x-content-type-options', 'nosniff');
    const ifNoneMatch = request.headers['if-none-match'];
    const ifModifiedSince = request.headers['if-modified-since'];
    const unchanged =
      ifNoneMatch !== undefined
        ? matchesEtag(ifNoneMatch, etag)
        : ifModifiedSince !== undefined && image.storedAt.getTime() - 1000 < Date.parse(ifModifiedSince);
    if (unchanged) return reply.code(304).send();
    if (head) return reply.header('content-length', String(image.size)).send();
    const bytes = image.bytes!;
    const ifRange = request.headers['if-range'];
    if (range && (ifRange === undefined || ifRange === etag)) {
      const wanted = rangeOf(range, bytes.length);
      if (wanted === null) {
        const message = `the range ${range} is outside the image (${bytes.length} bytes)`;
        return reply
          .code(416)
          .header('content-range', `bytes */${bytes.length}`)
          .type('application/json; charset=utf-8')
          .send({ error: message, detail: message, code: 'RANGE_NOT_SATISFIABLE' });
      }
      if (wanted) {
        return reply
          .code(206)
          .header('content-range', `bytes ${wanted.start}-${wanted.end}/${bytes.length}`)
          .send(bytes.subarray(wanted.start, wanted.end + 1));
      }
    }
    return reply.send(bytes);
  };
  app.route({ method: ['GET', 'HEAD'], url: '/uploads/:name', handler: serve });
}
