/**
 * What third-party HTTP clients meet first: the Swagger UI page as a
 * browser loads it, the browser's CORS preflights, Redocly's recommended
 * rules on every mount's OpenAPI document; with the blog on either backend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import type { RunningServe } from '../../src/server/serve.js';
import { startTestServe } from '../helpers/serve.js';
import { BACKENDS } from '../helpers/postgres.js';

const MOUNTS = ['/api/v1', '/api/v2', '/api'];
const ORIGIN = 'https://app.example.com';
const RELAY_ROUTES: [string, string][] = [
  ['POST', '/api/auth/token'],
  ['POST', '/api/auth/refresh'],
  ['GET', '/api/auth/me'],
  ['POST', '/api/auth/logout'],
  ['POST', '/api/auth/logout-by-user-key'],
  ['GET', '/api/auth/unlink-callback'],
  ['POST', '/api/auth/unlink-callback'],
  ['GET', '/health'],
];

let running: RunningServe;

async function get(url: string, headers: Record<string, string> = {}) {
  const response = await request(url, { headers });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

async function openapi(mount: string): Promise<{ servers: { url: string }[]; paths: Record<string, Record<string, unknown>>; info: { version: string } }> {
  const res = await get(`${running.url}${mount}/openapi.json`);
  expect(res.status).toBe(200);
  return JSON.parse(res.text);
}

/** Every asset a page references in src= or href=, resolved as a browser resolves it. */
function assetsOf(html: string, pageUrl: string): string[] {
  return [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((match) => new URL(match[1]!, pageUrl).href);
}

describe.each(BACKENDS)('HTTP clients of serve with the blog on %s', (backend) => {
  beforeAll(async () => {
    running = await startTestServe({ corsOrigin: ORIGIN }, backend);
  });
  afterAll(async () => running.close());

  describe('the docs page of every mount, as a browser loads it', () => {
    for (const mount of MOUNTS) {
      for (const slash of ['', '/']) {
        it(`${mount}/docs${slash} references only assets that answer 200`, async () => {
          const pageUrl = `${running.url}${mount}/docs${slash}`;
          const page = await get(pageUrl);
          expect(page.status).toBe(200);
          expect(page.headers['content-type']).toMatch(/text\/html/);
          const assets = assetsOf(page.text, pageUrl);
          expect(assets.length).toBeGreaterThanOrEqual(5);
          for (const asset of assets) {
            expect(asset.startsWith(`${running.url}${mount}/docs/`), asset).toBe(true);
            expect((await get(asset)).status, asset).toBe(200);
          }
          // The initializer resolves './json' against the page URL with a trailing slash ensured.
          const json = await get(new URL('./json', pageUrl.endsWith('/') ? pageUrl : `${pageUrl}/`).href);
          expect(json.status).toBe(200);
          expect(JSON.parse(json.text).info.version).toBe((await openapi(mount)).info.version);
        });
      }
    }
  });

  describe('CORS preflights as a browser sends them', () => {
    async function preflight(path: string, method: string, origin = ORIGIN) {
      const response = await request(`${running.url}${path}`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
      });
      await response.body.dump();
      return { status: response.statusCode, headers: response.headers };
    }

    it('allows every method and header of every blog and relay route from the allowed origin', async () => {
      const routes: [string, string][] = [...RELAY_ROUTES];
      for (const mount of MOUNTS) {
        const document = await openapi(mount);
        const server = document.servers[0]!.url;
        for (const [path, operations] of Object.entries(document.paths)) {
          for (const method of Object.keys(operations)) routes.push([method.toUpperCase(), `${server}${path.replace(/\{[^}]+\}/g, '1')}`]);
        }
      }
      expect(routes.filter(([method]) => method === 'PATCH').length).toBe(MOUNTS.length);
      for (const [method, path] of routes) {
        const res = await preflight(path, method);
        expect(res.status, `${method} ${path}`).toBe(204);
        expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
        expect(res.headers['access-control-allow-credentials']).toBe('true');
        const methods = String(res.headers['access-control-allow-methods']).split(/,\s*/);
        expect(methods, `${method} ${path}`).toContain(method);
        const headers = String(res.headers['access-control-allow-headers']).toLowerCase().split(/,\s*/);
        expect(headers).toEqual(expect.arrayContaining(['authorization', 'content-type']));
      }
    });

    it('answers a preflight from another origin like any preflight, without CORS headers', async () => {
      const res = await preflight('/api/v2/blog/posts/1', 'PATCH', 'https://evil.example');
      expect(res.status).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expect(res.headers['access-control-allow-methods']).toBeUndefined();
    });

    it('answers preflights without CORS headers when no origin is configured', async () => {
      const plain = await startTestServe({}, backend);
      try {
        const response = await request(`${plain.url}/api/v2/blog/posts`, {
          method: 'OPTIONS',
          headers: { origin: ORIGIN, 'access-control-request-method': 'POST' },
        });
        await response.body.dump();
        expect(response.statusCode).toBe(204);
        expect(response.headers['access-control-allow-origin']).toBeUndefined();
      } finally {
        await plain.close();
      }
    });
  });

  describe('Redocly CLI, recommended rules', () => {
    it("finds no error and no warning in any mount's document", { timeout: 60_000 }, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'miniapp-redocly-'));
      try {
        for (const mount of MOUNTS) {
          const file = join(dir, `${mount.replace(/\//g, '_')}.json`);
          writeFileSync(file, JSON.stringify(await openapi(mount)));
          const { stdout } = await promisify(execFile)(
            join('node_modules', '.bin', 'redocly'),
            ['lint', '--extends', 'recommended', '--format', 'json', file],
            {
              env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
            },
          ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
          const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string }[] };
          expect(report.problems.map((p) => `${mount}: ${p.ruleId}: ${p.message}`)).toEqual([]);
          expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
