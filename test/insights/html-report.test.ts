/**
 * `insights account|media --format html --output FILE` through the built
 * CLI against a graph sandbox on 127.0.0.1:0, then the file opened in
 * headless Chromium from a file:// URL with networking disabled: its
 * charts are drawn (the DOM has uPlot's canvases; the screenshot has the
 * chart's colours across the chart's area), its tables and header are
 * there, and it asked for nothing outside itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BIN } from '../helpers/launcher.js';
import { runChromium } from '../helpers/chromium.js';
import { readPng, type Image } from '../helpers/png.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { startGraphSandbox, type GraphSandbox } from './graph-sandbox.js';

let graph: GraphSandbox;
let home: string;
beforeAll(async () => {
  graph = await startGraphSandbox();
  home = mkdtempSync(join(tmpdir(), 'miniapp-report-'));
});
afterAll(async () => {
  await graph?.close();
  rmSync(home, { recursive: true, force: true });
});

/** The built CLI as a child process (asynchronous: the graph sandbox answers from this process). */
function miniapp(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      {
        env: {
          PATH: process.env.PATH,
          HOME: home,
          MINIAPP_CONFIG_DIR: join(home, 'config'),
          MINIAPP_DATA_DIR: join(home, 'data'),
          MINIAPP_GRAPH_URL: graph.url,
          MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page,
        },
      },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Headless Chromium, networking off: every host unresolvable and every proxy a closed port. */
function chromium(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return runChromium(['--proxy-server=127.0.0.1:9', '--host-resolver-rules=MAP * ~NOTFOUND', '--hide-scrollbars', '--window-size=1200,1400', ...args], {
    accept: (stdout, stderr) => stdout !== '' || /bytes written to file/.test(stderr),
  });
}

/** Pixels of `image` close to `rgb`, and the box around them. */
function pixelsLike(
  image: Image,
  rgb: [number, number, number],
  tolerance = 24,
): { count: number; box: { left: number; top: number; right: number; bottom: number } } {
  let count = 0;
  const box = { left: Infinity, top: Infinity, right: -Infinity, bottom: -Infinity };
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const [r, g, b] = image.pixel(x, y);
      if (Math.abs(r - rgb[0]) + Math.abs(g - rgb[1]) + Math.abs(b - rgb[2]) > tolerance) continue;
      count++;
      box.left = Math.min(box.left, x);
      box.right = Math.max(box.right, x);
      box.top = Math.min(box.top, y);
      box.bottom = Math.max(box.bottom, y);
    }
  }
  return { count, box };
}

/** The share of pixels in the box that are not the page's white. */
function inked(image: Image, box: { left: number; top: number; right: number; bottom: number }): number {
  let ink = 0;
  let all = 0;
  for (let y = box.top; y <= box.bottom; y++) {
    for (let x = box.left; x <= box.right; x++) {
      const [r, g, b] = image.pixel(x, y);
      all++;
      if (r + g + b < 740) ink++;
    }
  }
  return ink / all;
}

/** What every report must be: nothing that reaches outside the file. */
function expectSelfContained(html: string): void {
  expect(html).toContain('Content-Security-Policy" content="default-src \'none\'');
  expect(html).not.toMatch(/<(script|link|img|iframe)[^>]+(src|href)=/i);
  expect(html).not.toMatch(/url\(\s*['"]?https?:/i);
  expect(html).not.toMatch(/@import/i);
}

/** The first chart's colour (the report's palette starts with it). */
const FIRST_SERIES: [number, number, number] = [0x1f, 0x77, 0xb4];

describe('insights --format html: one self-contained report', () => {
  it('account: renders every daily metric as a chart in Chromium offline, with the header and the table', { timeout: 120_000 }, async () => {
    const file = join(home, 'account.html');
    const result = await miniapp([
      'insights',
      'account',
      '--account',
      MAIN_ACCOUNT_ID,
      '--since',
      '2026-10-22',
      '--until',
      '2026-11-20',
      '--format',
      'html',
      '--output',
      file,
    ]);
    expect(result.stderr).toBe(`wrote an HTML report of 4 charts to ${file}\n`);
    expect(result.code).toBe(0);
    const html = readFileSync(file, 'utf8');
    expectSelfContained(html);
    expect(html).toContain(`<dd id="report-account">${MAIN_ACCOUNT_ID}</dd>`);
    expect(html).toContain('<dd id="report-range">2026-10-22 to 2026-11-20 (day)</dd>');
    expect(html).toMatch(/<dd id="report-generated">\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z<\/dd>/);

    const url = pathToFileURL(file).href;
    const { stdout: dom, stderr } = await chromium(['--dump-dom', url]);
    // uPlot ran: each of the four chart boxes holds its canvas, and the page counted them drawn.
    expect(dom).toContain('data-charts-drawn="4"');
    for (let i = 0; i < 4; i++)
      expect(dom).toMatch(new RegExp(`<div class="chart" id="chart-${i}" data-kind="line"><div class="uplot[^"]*"[^>]*>.*?<canvas`, 's'));
    expect(dom.match(/<canvas/g)!.length).toBeGreaterThanOrEqual(4);
    for (const metric of ['reach', 'impressions', 'follower_count', 'profile_views']) expect(dom).toContain(`<h2>${metric}</h2>`);
    // The table of the days under the charts: 30 rows.
    expect(dom.match(/<tr><td>2026-1\d-\d\d<\/td>/g)!.length).toBe(30);
    // Nothing was refused by the page's policy or failed to load.
    expect(stderr.split('\n').filter((line) => /:CONSOLE|Content Security Policy|ERR_/.test(line) && !/dbus|gpu/i.test(line))).toEqual([]);

    const shot = join(home, 'account.png');
    await chromium([`--screenshot=${shot}`, url]);
    const image = readPng(readFileSync(shot));
    expect([image.width, image.height]).toEqual([1200, 1400]);
    // The first chart's line and fill: its colour runs across the chart's width, and its area has ink.
    const line = pixelsLike(image, FIRST_SERIES);
    expect(line.count).toBeGreaterThan(1000);
    expect(line.box.right - line.box.left).toBeGreaterThan(800);
    expect(line.box.bottom - line.box.top).toBeGreaterThan(100);
    expect(line.box.top).toBeLessThan(500);
    expect(inked(image, line.box)).toBeGreaterThan(0.05);
  });

  it('media: renders the bar chart of the top media by the --chart metric, and every media row below it', { timeout: 120_000 }, async () => {
    const file = join(home, 'media.html');
    const result = await miniapp([
      'insights',
      'media',
      '--account',
      MAIN_ACCOUNT_ID,
      '--metrics',
      'reach,saved',
      '--chart',
      'saved',
      '--format',
      'html',
      '--output',
      file,
    ]);
    expect(result.code).toBe(0);
    const html = readFileSync(file, 'utf8');
    expectSelfContained(html);
    expect(html).toContain('<dd id="report-range">the 25 newest media</dd>');

    const url = pathToFileURL(file).href;
    const { stdout: dom } = await chromium(['--dump-dom', url]);
    expect(dom).toContain('data-charts-drawn="1"');
    expect(dom).toContain('<h2>top 25 media by saved</h2>');
    expect(dom).toMatch(/<div class="chart" id="chart-0" data-kind="bars"><div class="uplot[^"]*"[^>]*>.*?<canvas/s);
    expect(dom).toContain('<h2>25 media</h2>');
    expect(dom.match(/<tr><td>1790/g)!.length).toBe(25);

    const shot = join(home, 'media.png');
    await chromium([`--screenshot=${shot}`, url]);
    const image = readPng(readFileSync(shot));
    const bars = pixelsLike(image, FIRST_SERIES, 60);
    expect(bars.count).toBeGreaterThan(5000);
    expect(bars.box.right - bars.box.left).toBeGreaterThan(800);
    expect(inked(image, bars.box)).toBeGreaterThan(0.1);
  });
});
