/**
 * `miniapp insights account --chart` and `insights media --chart METRIC`
 * as a person sees them: the built CLI (bin/miniapp.cjs) in real tmux
 * panes of 80x24 and 160x50 against a graph sandbox on 127.0.0.1:0, read
 * back with capture-pane; and in-process for the colour policy and the
 * refusals without a terminal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, traceLoads } from '../helpers/launcher.js';
import { Sandbox } from '../helpers/cli.js';
import { Tmux, shellQuote, type Pane } from '../helpers/tmux.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { NOW, startGraphSandbox, type GraphSandbox } from './graph-sandbox.js';

const SINCE = '2026-10-22';
const UNTIL = '2026-11-20';
const METRICS = ['reach', 'impressions', 'follower_count', 'profile_views'];
/** A row of a plot: its value label (1.2k, 337, 81.7) and the axis. */
const PLOT_ROW = /^ *-?\d+(\.\d+)?[kMBT]? ┤/;

let graph: GraphSandbox;
let home: string;
const tmux = new Tmux();

beforeAll(async () => {
  graph = await startGraphSandbox();
  home = mkdtempSync(join(tmpdir(), 'miniapp-chart-'));
});
afterAll(async () => {
  tmux.kill();
  await graph?.close();
  rmSync(home, { recursive: true, force: true });
});

function env(): Record<string, string> {
  return {
    HOME: home,
    MINIAPP_CONFIG_DIR: join(home, 'config'),
    MINIAPP_DATA_DIR: join(home, 'data'),
    MINIAPP_GRAPH_URL: graph.url,
    MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page,
    MINIAPP_GRAPH_ACCOUNT: MAIN_ACCOUNT_ID,
  };
}

/** The CLI in a fresh pane, as typed at a shell; the pane then shows `[exit N]` under its output and keeps it. */
async function inPane(width: number, height: number, args: string[]): Promise<{ pane: Pane; screen: string[] }> {
  const line = `${shellQuote(process.execPath)} ${shellQuote(BIN)} ${args.map(shellQuote).join(' ')}; echo "[exit $?]"; exec sleep 3600`;
  const pane = await tmux.session(width, height, `sh -c ${shellQuote(line)}`, env());
  const screen = await pane.waitFor('the command to end', (rows) => rows.some((row) => row.startsWith('[exit')) && rows);
  return { pane, screen };
}

/** Where each chart's title is, and how many plot rows follow it. */
function charts(screen: string[]): { title: string; rows: number }[] {
  const out: { title: string; rows: number }[] = [];
  for (const row of screen) {
    const title = METRICS.find((metric) => row.startsWith(`${metric}  `));
    if (title) out.push({ title, rows: 0 });
    else if (PLOT_ROW.test(row) && out.length > 0) out.at(-1)!.rows++;
  }
  return out;
}

describe('insights account --chart in a terminal', () => {
  const sizes = [
    [80, 24],
    [160, 50],
  ] as const;
  const seen: Record<string, { rows: number; rule: number }> = {};

  for (const [width, height] of sizes) {
    it(`fits a ${width}x${height} pane: every chart and its labelled axes on screen, nothing wrapped`, { timeout: 60_000 }, async () => {
      const { pane, screen } = await inPane(width, height, ['insights', 'account', '--chart', '--since', SINCE, '--until', UNTIL]);
      expect(await pane.format('#{pane_width}x#{pane_height}')).toBe(`${width}x${height}`);
      expect(screen.find((row) => row.startsWith('[exit'))).toBe('[exit 0]');
      // Everything the command wrote is on the visible screen: nothing scrolled away.
      const drawn = charts(screen);
      expect(drawn.map((c) => c.title)).toEqual(METRICS);
      for (const chart of drawn) expect(chart.rows).toBeGreaterThanOrEqual(3);
      expect(screen[0]).toMatch(/^reach {2}last /);
      // Value labels are formatted numbers; reach runs in thousands.
      const labels = screen.filter((row) => PLOT_ROW.test(row)).map((row) => row.split('┤')[0]!.trim());
      expect(labels.some((label) => /^\d+(\.\d)?k$/.test(label))).toBe(true);
      // The shared date axis: a rule with ticks under the plots, the first and last day under it.
      const ruleAt = screen.findIndex((row) => /^ +┼─.*┬/.test(row));
      expect(ruleAt).toBeGreaterThan(0);
      const dates = screen[ruleAt + 1]!;
      expect(dates).toContain('Oct 22');
      expect(dates).toContain('Nov 20');
      expect(dates.match(/[A-Z][a-z]{2} \d{1,2}/g)!.length).toBeGreaterThanOrEqual(4);
      // Nothing wrapped: joined back (-J), every line the command wrote is narrower than the pane.
      const joined = (await pane.joined()).filter((row) => row !== '');
      for (const row of joined) expect([...row].length, row).toBeLessThan(width);
      expect(joined.length).toBe(screen.filter((row) => row !== '').length);
      seen[`${width}`] = { rows: drawn[0]!.rows, rule: [...screen[ruleAt]!.trim()].length };
    });
  }

  it('uses a larger terminal: taller plots and more days on a wider axis', () => {
    expect(seen['160']!.rows).toBeGreaterThan(seen['80']!.rows);
    expect(seen['160']!.rule).toBeGreaterThan(seen['80']!.rule + 60);
  });

  it('draws the top media as bars fitted to the width: caption or id, media type, the number', { timeout: 60_000 }, async () => {
    const { pane, screen } = await inPane(80, 24, ['insights', 'media', '--chart', 'reach']);
    expect(screen.find((row) => row.startsWith('[exit'))).toBe('[exit 0]');
    const title = screen.findIndex((row) => row.startsWith('top '));
    expect(screen[title]).toMatch(/^top \d+ of 25 media by reach$/);
    const bars = screen.slice(title + 1).filter((row) => row.includes('█'));
    expect(bars.length).toBeGreaterThanOrEqual(10);
    for (const bar of bars) expect(bar).toMatch(/(IMAGE|VIDEO|CAROUSEL_ALBUM|REELS?) +█+[▏▎▍▌▋▊▉]? +\d+(\.\d)?k?$/);
    // Largest first.
    const lengths = bars.map((bar) => (bar.match(/█/g) ?? []).length);
    expect([...lengths].sort((a, b) => b - a)).toEqual(lengths);
    for (const row of (await pane.joined()).filter(Boolean)) expect([...row].length, row).toBeLessThan(80);
  });
});

describe('insights --chart without a terminal, and its colours', () => {
  const token = SANDBOX_GRAPH_TOKENS.page;
  async function run(argv: string[], options: { tty: boolean; env?: Record<string, string> }) {
    const sb = new Sandbox();
    try {
      return await sb.run(['insights', ...argv], {
        env: { MINIAPP_GRAPH_URL: graph.url, MINIAPP_GRAPH_TOKEN: token, MINIAPP_GRAPH_ACCOUNT: MAIN_ACCOUNT_ID, ...options.env },
        now: new Date(NOW),
        tty: options.tty,
      });
    } finally {
      sb.dispose();
    }
  }

  it('refuses --chart when stdout is not a terminal, in one line naming --format html and CSV (exit 2)', async () => {
    for (const argv of [
      ['account', '--chart'],
      ['media', '--chart', 'reach'],
    ]) {
      const result = await run(argv, { tty: false });
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toBe(
        'error: --chart draws on a terminal; piped or redirected, use --format html --output report.html, or --format csv for the data\n',
      );
    }
  });

  it('refuses --chart with --json, --format or --output, and audience_* metrics alone', async () => {
    expect((await run(['account', '--chart', '--json'], { tty: true })).code).toBe(2);
    expect((await run(['account', '--chart', '--format', 'csv'], { tty: true })).stderr).toContain('--chart draws on the terminal');
    const audience = await run(['account', '--chart', '--metrics', 'audience_country'], { tty: true });
    expect(audience.code).toBe(2);
    expect(audience.stderr).toContain('--chart draws daily metrics');
    expect((await run(['media', '--chart', 'reach,saved'], { tty: true })).stderr).toContain('--chart takes one metric name');
  });

  it('writes an HTML report to stdout when piped, and asks for --output on a terminal', async () => {
    const piped = await run(['account', '--since', SINCE, '--until', UNTIL, '--format', 'html'], { tty: false });
    expect(piped.code).toBe(0);
    expect(piped.stdout.startsWith('<!doctype html>')).toBe(true);
    expect(piped.stdout).toContain('<dd id="report-range">2026-10-22 to 2026-11-20 (day)</dd>');
    const tty = await run(['media', '--format', 'html'], { tty: true });
    expect(tty.code).toBe(2);
    expect(tty.stderr).toContain('an HTML report is for a file: add --output report.html');
  });

  it('colours the lines on a terminal and not under NO_COLOR or --no-color; --color beats NO_COLOR', async () => {
    const argv = ['account', '--chart', '--since', SINCE, '--until', UNTIL, '--metrics', 'reach'];
    const coloured = await run(argv, { tty: true, env: { TERM: 'xterm-256color' } });
    expect(coloured.code).toBe(0);
    expect(coloured.stdout).toContain('\u001b[36m');
    for (const plain of [await run(argv, { tty: true, env: { NO_COLOR: '1', TERM: 'xterm-256color' } }), await run([...argv, '--no-color'], { tty: true })]) {
      expect(plain.code).toBe(0);
      expect(plain.stdout).not.toContain('\u001b');
      expect(plain.stdout).toMatch(/^reach {2}last /);
    }
    const forced = await run([...argv, '--color'], { tty: true, env: { NO_COLOR: '1', TERM: 'xterm-256color' } });
    expect(forced.stdout).toContain('\u001b[36m');
  });
});

describe('start-up', () => {
  it('loads no chart or dashboard module for help or the other commands', () => {
    for (const args of [['--help'], ['insights', 'account', '--help'], ['monitor', '--help'], ['monitor', 'dashboard', '--help']]) {
      const { loaded } = traceLoads(home, args);
      expect(
        loaded.filter((entry) => /asciichart|uplot|sparkly|\/cli\/charts\/|dashboard|insights-charts/i.test(entry)),
        args.join(' '),
      ).toEqual([]);
    }
  });
});
