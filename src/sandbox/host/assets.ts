/**
 * The host page's files: plain HTML, CSS and browser JavaScript in
 * web/host/ (shipped in the package beside dist/, never compiled), read
 * once when the routes are registered; and the policies they are served
 * under. Every page runs only its own scripts and styles from this server
 * (no inline script or style), talks only to this server, and sends
 * nothing anywhere else; the host page may frame the one mini-app it shows.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

/** web/host/ of the package: two folders up from src/sandbox/host/ and from dist/sandbox/host/ alike. */
const HOST_ASSETS_DIR = fileURLToPath(new URL('../../../web/host/', import.meta.url));

export interface Asset {
  body: string;
  type: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
};

/** The files the routes serve, by name; the pages are served at their own paths, the rest at /host/NAME. */
const PAGE_FILES = ['index.html', 'login.html', 'demo.html'] as const;
export const SCRIPT_AND_STYLE_FILES = ['host.css', 'host.js', 'consent.js', 'api.js', 'login.js', 'demo.css', 'demo.js', 'app-login.js'] as const;

export function loadAssets(dir = HOST_ASSETS_DIR): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of [...PAGE_FILES, ...SCRIPT_AND_STYLE_FILES]) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))]!;
    assets.set(name, { body: readFileSync(join(dir, name), 'utf8'), type });
  }
  return assets;
}

/** What every page of the host allows: its own scripts, styles and calls, nothing inline, nothing from elsewhere. */
function pagePolicy(extra: Record<string, string>): string {
  const directives: Record<string, string> = {
    'default-src': "'none'",
    'script-src': "'self'",
    'style-src': "'self'",
    'img-src': "'self' data:",
    'connect-src': "'self'",
    'base-uri': "'none'",
    'form-action': "'none'",
    'frame-ancestors': "'none'",
    ...extra,
  };
  return Object.entries(directives)
    .map(([name, value]) => `${name} ${value}`)
    .join('; ');
}

/** The host page: it frames the mini-app at `frameOrigin` ('self' for the demo; 'none' when the URL given is not one). */
export function hostPageCsp(frameOrigin: string): string {
  return pagePolicy({ 'frame-src': frameOrigin });
}

/** The login window a mini-app outside the host page opens. */
export const LOGIN_PAGE_CSP = pagePolicy({});

/** The demo mini-app: framed by the host page (same origin), calling the relay of this server. */
export const DEMO_PAGE_CSP = pagePolicy({ 'frame-ancestors': "'self'" });
