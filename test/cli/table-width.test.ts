/**
 * Tables fit the terminal (issue 11, item 5): at any width no line of a
 * table is wider than the terminal, long text columns (captions, URLs,
 * messages) give way first with an ellipsis, IDs and states stay whole,
 * and piped rows and --json stay whole whatever the width.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, plain } from '../helpers/cli.js';
import { textWidth } from '../../src/cli/render/text-width.js';
import { relativeTime } from '../../src/duration.js';
import { openStore } from '../../src/store/store.js';
import { POST_CREATED } from '../../src/blog/posts.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { SANDBOX_GRAPH_TOKENS, MAIN_ACCOUNT_ID } from '../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox, type GraphSandbox } from '../insights/graph-sandbox.js';

const WIDTHS = [60, 100, 160];
const T0 = new Date('2026-11-21T12:00:00.000Z');
const LONG_URL = 'https://hooks.example.com/receivers/blog/post-created/v2?tenant=acme-corporation';
const LONG_ERROR = 'getaddrinfo ENOTFOUND hooks.example.com';

let sb: Sandbox;
let dir: string;
let graph: GraphSandbox | undefined;

beforeEach(() => {
  sb = new Sandbox();
  dir = mkdtempSync(join(tmpdir(), 'miniapp-table-width-'));
});
afterEach(async () => {
  await graph?.close();
  graph = undefined;
  sb.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** Each line of the table on stdout, colour codes removed, as [line, width in cells]. */
function tableLines(stdout: string): { line: string; width: number }[] {
  return plain(stdout)
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => ({ line, width: textWidth(line) }));
}

/** The cells of the body rows of a box table, trimmed. */
function bodyCells(stdout: string): string[][] {
  return tableLines(stdout)
    .slice(2, -1)
    .map(({ line }) =>
      line
        .split('│')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

/** The body rows of a box table as records by header (the columns shown), trimmed. */
function rowsByHeader(stdout: string): { headers: string[]; rows: Record<string, string>[] } {
  const lines = tableLines(stdout);
  const headers = lines[1]!.line
    .split('│')
    .slice(1, -1)
    .map((cell) => cell.trim());
  const rows = bodyCells(stdout).map((cells) => Object.fromEntries(headers.map((header, i) => [header, cells[i]!])));
  return { headers, rows };
}

/** The columns a table left out, as its note on stderr names them. */
function leftOut(stderr: string): string[] {
  const note = /\(not shown at \d+ columns: ([^;]+);/.exec(plain(stderr).replace(/\n/g, ' '));
  return note ? note[1]!.split(', ') : [];
}

/** Three deliveries to one long URL: delivered, pending after a long network error, failed after 500s. */
async function fillOutbox(): Promise<void> {
  let now = T0;
  const store = await openStore({ kind: 'sqlite', dataDir: dir });
  let call = 0;
  const hooks = new WebhookDispatcher({
    store,
    secret: 'table-width',
    now: () => now,
    version: '1.0.0',
    send: async () => {
      call++;
      if (call === 1) return { status: 200 };
      if (call === 2) throw Object.assign(new Error(LONG_ERROR), { code: 'ENOTFOUND' });
      return { status: 500 };
    },
  });
  await hooks.outbox.enqueue(POST_CREATED, { id: 1 }, [LONG_URL]);
  await hooks.runDue();
  await hooks.outbox.enqueue(POST_CREATED, { id: 2 }, [LONG_URL]);
  await hooks.runDue();
  now = new Date(T0.getTime() + 1000);
  await hooks.outbox.enqueue(POST_CREATED, { id: 3 }, [LONG_URL]);
  await hooks.runDue();
  await store.close();
}

describe('webhooks list on a terminal', () => {
  it.each(WIDTHS)('fits %i columns, cutting the URL first and the last error next, never the ID or the state', async (width) => {
    await fillOutbox();
    const result = await sb.run(['webhooks', 'list', '--data-dir', dir, '--no-color'], { tty: true, columns: width, now: T0 });
    expect(result.code, result.stderr).toBe(0);
    const lines = tableLines(result.stdout);
    expect(lines.length).toBe(3 + 3);
    for (const { line, width: used } of lines) expect(used, line).toBeLessThanOrEqual(width);

    const { headers, rows } = rowsByHeader(result.stdout);
    // Every column is shown or named as left out.
    expect([...headers, ...leftOut(result.stderr)].sort()).toEqual(
      ['attempts', 'created', 'event', 'id', 'last result', 'next attempt', 'state', 'url'].sort(),
    );
    expect(rows.map((r) => r.id)).toEqual(['1', '2', '3']);
    // The state is never cut nor left out.
    expect(rows.map((r) => r.state)).toEqual(['delivered', 'pending', 'pending']);
    if (headers.includes('url')) {
      const url = rows.map((r) => r.url!);
      expect(
        url.every((cell) => cell.endsWith('…') && LONG_URL.startsWith(cell.slice(0, -1))),
        url.join(' | '),
      ).toBe(true);
    }
    if (width >= 100) expect(rows.map((r) => r.event)).toEqual(['post.created', 'post.created', 'post.created']);
    if (width === 160) {
      // Only the URL had to give way.
      expect(rows[1]!['last result']).toBe(LONG_ERROR);
      // On a terminal times read relative to now (the CLI's clock is T0).
      expect(rows.map((r) => r.created)).toEqual(['just now', 'just now', 'in 1s']);
      expect(rows.map((r) => r['next attempt'])).toEqual(['', 'in 1m', 'in 1m 1s']);
    } else if (headers.includes('last result')) {
      expect(rows[1]!['last result']!.endsWith('…')).toBe(true);
    }
  });

  it('keeps every cell whole when piped or with --json, however narrow the terminal', async () => {
    await fillOutbox();
    const piped = await sb.run(['webhooks', 'list', '--data-dir', dir], { columns: 60 });
    expect(piped.stdout.split('\n')[1]!.split('\t').slice(2, 3)).toEqual([LONG_URL]);
    expect(piped.stdout).toContain(LONG_ERROR);
    const json = await sb.run(['webhooks', 'list', '--data-dir', dir, '--json'], { tty: true, columns: 60 });
    expect((JSON.parse(json.stdout) as { url: string }[]).map((d) => d.url)).toEqual([LONG_URL, LONG_URL, LONG_URL]);
  });
});

describe('insights media on a terminal', () => {
  it.each(WIDTHS)('fits %i columns, captions cut first and links next, IDs whole', async (width) => {
    graph = await startGraphSandbox({ media: 12 });
    const result = await sb.run(['insights', 'media', '--account', MAIN_ACCOUNT_ID, '--limit', '6', '--no-color'], {
      env: { MINIAPP_GRAPH_URL: graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page },
      now: new Date(NOW),
      tty: true,
      columns: width,
    });
    expect(result.code, result.stderr).toBe(0);
    for (const { line, width: used } of tableLines(result.stdout)) expect(used, line).toBeLessThanOrEqual(width);
    const media = graph.data.account(MAIN_ACCOUNT_ID)!.media.slice(0, 6);
    const { headers, rows } = rowsByHeader(result.stdout);
    const omitted = leftOut(result.stderr);
    expect([...headers, ...omitted].sort()).toEqual([
      'caption',
      'comments_count',
      'id',
      'like_count',
      'media_type',
      'permalink',
      'reach',
      'saved',
      'shares',
      'timestamp',
    ]);
    // IDs, types and numbers are whole, never cut: shown whole or left out (and the id and the metrics never are).
    expect(rows.map((r) => r.id)).toEqual(media.map((m) => m.id));
    expect(rows.map((r) => r.reach)).toEqual(media.map((m) => String(m.insights.reach)));
    expect(rows.map((r) => r.saved)).toEqual(media.map((m) => String(m.insights.saved)));
    if (headers.includes('media_type')) expect(rows.map((r) => r.media_type)).toEqual(media.map((m) => m.fields.media_type));
    if (headers.includes('timestamp')) expect(rows.map((r) => r.timestamp)).toEqual(media.map((m) => m.fields.timestamp));
    if (headers.includes('like_count')) expect(rows.map((r) => r.like_count)).toEqual(media.map((m) => String(m.fields.like_count)));
    for (const cell of rows.flatMap((r) => Object.entries(r)).filter(([header]) => header !== 'caption' && header !== 'permalink'))
      expect(cell[1]).not.toContain('…');
    // Text gives way first: the caption is cut before anything whole is left out.
    if (omitted.some((header) => header !== 'caption' && header !== 'permalink')) expect(omitted).toContain('caption');
    if (width === 160) {
      const captions = rows.map((r) => r.caption!);
      // The caption gave way first, to its minimum; the link next, a little; everything else is whole.
      expect(captions.filter(Boolean).every((c) => c.endsWith('…') && textWidth(c) === 8)).toBe(true);
      expect(rows.map((r) => r.permalink!.slice(0, -1)).every((p, i) => (media[i]!.fields.permalink as string).startsWith(p))).toBe(true);
      expect(omitted).toEqual([]);
    }
    if (width === 60) expect(headers).toEqual(['id', 'media_type', 'reach', 'saved', 'shares']);
  });
});

describe('wide characters', () => {
  it('at 60 columns a caption ending in an emoji keeps the borders straight', async () => {
    graph = await startGraphSandbox({ media: 6 });
    const surf = graph.data.account(MAIN_ACCOUNT_ID)!.media.find((m) => String(m.fields.caption).endsWith('🌊'))!;
    const result = await sb.run(['insights', 'media-item', surf.id, '--fields', 'caption', '--no-color'], {
      env: { MINIAPP_GRAPH_URL: graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page },
      now: new Date(NOW),
      tty: true,
      columns: 60,
    });
    expect(result.code, result.stderr).toBe(0);
    const lines = tableLines(result.stdout);
    // Every line as wide as the top border, and no wider than the terminal: the emoji was counted as two cells.
    expect(new Set(lines.map((l) => l.width)).size, result.stdout).toBe(1);
    expect(lines[0]!.width).toBeLessThanOrEqual(60);
    expect(bodyCells(result.stdout).find((r) => r[0] === 'caption')![1]).toBe(surf.fields.caption);
  });

  it('at 44 columns, where the table would cut it, the record is field and value lines with the caption whole', async () => {
    graph = await startGraphSandbox({ media: 6 });
    const surf = graph.data.account(MAIN_ACCOUNT_ID)!.media.find((m) => String(m.fields.caption).endsWith('🌊'))!;
    const result = await sb.run(['insights', 'media-item', surf.id, '--fields', 'caption', '--no-color'], {
      env: { MINIAPP_GRAPH_URL: graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page },
      now: new Date(NOW),
      tty: true,
      columns: 44,
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).not.toContain('│');
    expect(result.stdout.split('\n')).toEqual([`id       ${surf.id}`, `caption  ${surf.fields.caption}`, '']);
  });
});

describe('times on a terminal', () => {
  it('read relative to now within a day, as a date beyond', () => {
    const now = new Date('2026-11-21T12:00:00.000Z');
    expect(relativeTime('2026-11-21T11:57:30.000Z', now)).toBe('2m 30s ago');
    expect(relativeTime('2026-11-21T12:05:00.000Z', now)).toBe('in 5m');
    expect(relativeTime('2026-11-21T11:59:59.500Z', now)).toBe('just now');
    expect(relativeTime('2026-11-19T08:00:00.000Z', now)).toBe('2026-11-19');
  });

  it('say "due now" for an overdue next attempt in webhooks list', async () => {
    await fillOutbox();
    const result = await sb.run(['webhooks', 'list', '--data-dir', dir, '--no-color'], { tty: true, columns: 160, now: new Date(T0.getTime() + 5 * 60_000) });
    expect(bodyCells(result.stdout).map((r) => [r[5], r[7]])).toEqual([
      ['', '5m ago'],
      ['due now', '5m ago'],
      ['due now', '4m 59s ago'],
    ]);
  });
});
