/**
 * Security headers of serve's HTTP answers (src/http/security-headers.ts),
 * through a real listening serve: the strict policy on API answers (JSON,
 * errors, 404s, the relay), Swagger UI's own policy on the docs pages and
 * their assets, and a real browser (headless Chromium) rendering the docs
 * page under that policy: every operation drawn, no CSP violation in the
 * console.
 *
 * Chromium is required, not optional: without it the docs page's policy is
 * untested, so the test fails and says how to point it at a browser
 * (MINIAPP_TEST_CHROMIUM, else chromium, chromium-browser or google-chrome
 * on the PATH).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { API_CSP, docsCsp } from '../../src/http/security-headers.js';
import { startTestServe } from '../helpers/serve.js';
import { findChromium, runChromium } from '../helpers/chromium.js';

/** The page's DOM after its scripts ran (virtual time: no wall-clock wait), and the browser's console lines. */
async function render(url: string): Promise<{ dom: string; console: string[] }> {
  // Asynchronous: serve answers the browser from this very process.
  const { stdout, stderr } = await runChromium(['--dump-dom', url], { timeoutMs: 50_000 });
  return { dom: stdout, console: stderr.split('\n').filter((line) => line.includes(':CONSOLE')) };
}

const OPERATIONS = ['/blog/posts', '/blog/posts/{post_id}', '/users', '/auth/login', '/upload/image', '/upload/images'];

describe('security headers', () => {
  let running: RunningServe;
  beforeAll(async () => {
    running = await startTestServe();
  });
  afterAll(async () => running?.close());

  it('gives API answers, errors and 404s the strict policy and the helmet-style headers', async () => {
    for (const [method, path] of [
      ['GET', '/api/v2/blog/posts'],
      ['GET', '/api/v1/blog/posts/999'],
      ['GET', '/api/v2/openapi.json'],
      ['POST', '/api/auth/refresh'],
      ['GET', '/no/such/route'],
      ['GET', '/health'],
    ] as const) {
      const answer = await request(`${running.url}${path}`, { method });
      await answer.body.arrayBuffer();
      expect(answer.headers['content-security-policy'], path).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(answer.headers, path).toMatchObject({
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'cross-origin-opener-policy': 'same-origin',
      });
    }
    expect(API_CSP).toBe("default-src 'none'; frame-ancestors 'none'");
  });

  it("gives the docs pages and their assets Swagger UI's policy: this server's scripts only, no framing", async () => {
    for (const path of ['/api/v2/docs/', '/api/v1/docs', '/api/v2/docs/static/swagger-ui-bundle.js', '/api/docs/static/swagger-ui.css']) {
      const answer = await request(`${running.url}${path}`);
      // Read whole: dump() stops reading a large asset and leaves its answer in flight.
      await answer.body.arrayBuffer();
      expect(answer.statusCode, path).toBe(200);
      const policy = String(answer.headers['content-security-policy']);
      expect(policy, path).toBe(docsCsp());
      expect(policy).toContain("script-src 'self';");
      expect(policy).toContain("frame-ancestors 'none'");
      expect(policy).not.toContain('unsafe-inline');
      expect(answer.headers['x-content-type-options'], path).toBe('nosniff');
    }
  });

  it('lets "try it out" reach the public URL when the description names it', () => {
    expect(docsCsp(['https://blog.example.com'])).toContain("connect-src 'self' https://blog.example.com;");
  });

  it('renders Swagger UI in headless Chromium under that policy: every operation drawn, no CSP violation', { timeout: 120_000 }, async () => {
    findChromium(); // without a browser, fail at once saying how to point the test at one
    // With and without the trailing slash: the page links its assets differently.
    for (const [mount, expected] of [
      ['/api/v2/docs/', OPERATIONS],
      ['/api/v1/docs', OPERATIONS],
    ] as const) {
      const { dom, console } = await render(`${running.url}${mount}`);
      expect(dom, mount).toContain('class="swagger-ui"');
      for (const path of expected) expect(dom, `${mount}: operation ${path}`).toContain(`data-path="${path}"`);
      expect(dom, mount).toMatch(/miniapp blog API v[12]/);
      expect(
        console.filter((line) => /Content Security Policy|Refused to/i.test(line)),
        mount,
      ).toEqual([]);
    }
  });
});
