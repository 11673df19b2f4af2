/**
 * Security headers of every HTTP answer of `miniapp serve` (what helmet
 * sends, cut to what a JSON API and its docs pages need): no content
 * sniffing, no framing, no referrer, and a content security policy. API
 * answers are JSON and images, never pages, so their policy allows nothing
 * at all; the docs pages (Swagger UI) get DOCS_CSP instead, which lets the
 * page run its own scripts and styles from this server and nothing else.
 *
 * One precomputed object set by one hook: the headers cost every request.
 * HSTS is left to the TLS proxy in front of serve (serve speaks plain
 * HTTP, where browsers ignore it).
 */
import type { FastifyInstance } from 'fastify';

/** The policy of every answer that is not a docs page: nothing may load, nothing may frame it. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** The SHA-256 of the `<style>` inside Swagger UI's small SVG logo (@fastify/swagger-ui 6.1.0's bundle). */
const SWAGGER_UI_STYLE_HASH = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='";

/**
 * The policy of Swagger UI's pages and assets. Its page (index.html) has no
 * inline script or style; the bundle loads from this server, fetches the
 * OpenAPI description and sends "try it out" calls to this server
 * (connect-src), and draws its icons from data: URLs. `extraConnect` adds
 * origins "try it out" may call (the public URL, when the description's
 * server is absolute). The one inline style the bundle writes is the
 * `<style>` of its small SVG logo, allowed by its hash (SWAGGER_UI_STYLE_HASH)
 * rather than by 'unsafe-inline'; the browser test of the docs page fails
 * on any CSP violation, so a Swagger UI that writes another says so.
 */
export function docsCsp(extraConnect: readonly string[] = []): string {
  return [
    "default-src 'self'",
    "base-uri 'self'",
    `connect-src ${["'self'", ...extraConnect].join(' ')}`,
    "font-src 'self' data:",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "img-src 'self' data:",
    "object-src 'none'",
    "script-src 'self'",
    "script-src-attr 'none'",
    `style-src 'self' ${SWAGGER_UI_STYLE_HASH}`,
  ].join('; ');
}

/** Sent with every answer (the docs pages replace the CSP). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': API_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'x-permitted-cross-domain-policies': 'none',
};

/**
 * Adds the headers to every answer of `app`, errors and 404s included.
 * Call before registering any plugin: Fastify gives hooks to the plugins
 * registered after them.
 */
export function installSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (_request, reply, done) => {
    void reply.headers(SECURITY_HEADERS);
    done();
  });
}
