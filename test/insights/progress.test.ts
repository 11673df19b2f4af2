/**
 * Honest progress of long insights jobs (issue 11, item 3): on a terminal,
 * one line on stderr with the pages read of the total, the media so far,
 * the calls, and a throttled wait's countdown in place of the rate; nothing
 * of it on stdout, under --json or when piped.
 */
import { describe, expect, it } from 'vitest';
import { plain } from '../helpers/cli.js';
import { MAIN_ACCOUNT_ID, SANDBOX_GRAPH_TOKENS } from '../../src/sandbox/graph/data.js';
import { NOW, useGraphCli } from './graph-sandbox.js';

const cli = useGraphCli();

function run(argv: string[], options: { tty: boolean; env?: Record<string, string> }) {
  return cli.sb.run(['insights', ...argv, '--no-color'], {
    env: { MINIAPP_GRAPH_URL: cli.graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page, ...options.env },
    now: new Date(NOW),
    tty: options.tty,
    columns: 160,
  });
}

/** The progress lines drawn on stderr: each redraw starts with a carriage return and a line clear. */
function drawn(stderr: string): string[] {
  return (
    plain(stderr)
      // The spinner that came before shows the cursor again.
      .replace(/\x1b\[\?[0-9;]*[a-z]/g, '')
      .split('\r\x1b[2K')
      .map((line) => line.replace(/\n[\s\S]*$/, ''))
      .filter((line) => line.startsWith('reading '))
  );
}

describe('insights media --all on a terminal', () => {
  it('shows pages read of the total (from media_count), the media and the calls, then clears the line', async () => {
    await cli.start({ media: 250 });
    const result = await run(['media', '--all', '--metrics', 'reach', '--account', MAIN_ACCOUNT_ID], { tty: true });
    expect(result.code, result.stderr).toBe(0);
    const lines = drawn(result.stderr);
    expect(lines[0]).toBe('reading media · pages 0/3 (0%)');
    for (const line of lines.slice(1)) expect(line).toMatch(/^reading media · pages [0-3]\/3 \(\d+%\) · media \d+ · calls \d/);
    // Cleared before the table: the last thing on stderr is the line clear.
    expect(result.stderr.endsWith('\r\x1b[2K')).toBe(true);
    expect(plain(result.stdout)).not.toContain('reading media');
    expect(
      plain(result.stdout)
        .split('\n')
        .filter((l) => l.startsWith('│ 1790')).length,
    ).toBe(250);
    // media_count, then three pages of 100.
    expect(await cli.graph.graphCalls()).toBe(4);
  });

  it('counts a throttled wait down in the progress line, in place of the rate', async () => {
    // A fixed sandbox clock: five calls an hour, so the sixth call (the fifth page) is throttled and stays so.
    await cli.start({ media: 1000, rateLimit: { calls: 5, windowMs: 3_600_000 } });
    const result = await run(['media', '--all', '--fields', 'id', '--metrics', 'reach', '--account', MAIN_ACCOUNT_ID, '--max-retries', '1'], {
      tty: true,
      env: { MINIAPP_GRAPH_BACKOFF_MS: '1' },
    });
    expect(result.code).toBe(5);
    const waits = drawn(result.stderr).filter((line) => line.includes('rate limited'));
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]).toMatch(
      /^reading media · pages 4\/10 \(40%\) · rate limited by the graph API \(code 17\); retry 1 of 1 in \d+ms · media 400 · calls \d+$/,
    );
    expect(waits.every((line) => !/\/s\b|left/.test(line))).toBe(true);
    // A throttled wait is not also a warning line on a terminal: the countdown says it.
    expect(plain(result.stderr)).not.toContain('warning: rate limited');
  });

  for (const tty of [true, false]) {
    it(`on Ctrl-C says how many pages and items it read and that nothing was written (exit 130), ending a wait at once (${tty ? 'on a terminal' : 'piped'})`, async () => {
      // Five calls an hour: after the fifth the client paces itself for the rest of the window, long after the test.
      await cli.start({ media: 1000, rateLimit: { calls: 5, windowMs: 3_600_000 } });
      const pressed = (async () => {
        for (let i = 0; i < 500 && (await cli.graph.graphCalls()) < 5; i++) await new Promise((resolve) => setTimeout(resolve, 20));
        return 'SIGINT';
      })();
      const result = await cli.sb.run(['insights', 'media', '--all', '--fields', 'id', '--metrics', 'reach', '--account', MAIN_ACCOUNT_ID, '--no-color'], {
        env: { MINIAPP_GRAPH_URL: cli.graph.url, MINIAPP_GRAPH_TOKEN: SANDBOX_GRAPH_TOKENS.page },
        now: new Date(NOW),
        tty,
        columns: 160,
        shutdown: pressed,
      });
      expect(result.code, result.stderr).toBe(130);
      expect(result.stdout).toBe('');
      const said =
        /error: interrupted \(SIGINT\) after reading (\d+) pages of media \((\d+) items, \d+ calls\): nothing was written, since it would have been partial\nrun it again to read every media item; --since or a smaller --limit reads fewer\n$/.exec(
          plain(result.stderr),
        );
      expect(said, result.stderr).not.toBeNull();
      // Pages of 100: what it says it read is what it read, and it had read some (the fifth call was made).
      expect(Number(said![2])).toBe(Number(said![1]) * 100);
      expect(Number(said![1])).toBeGreaterThanOrEqual(3);
      // On a terminal the progress line was cleared before the message, and not drawn again.
      if (tty) expect(result.stderr.split('error: interrupted')[0]!.replace(/\x1b\[\?25h/g, '')).toMatch(/\r?\x1b\[2K$/);
    });
  }

  it('draws nothing under --json or when piped, and spends no call on the total', async () => {
    await cli.start({ media: 250 });
    const json = await run(['media', '--all', '--metrics', 'reach', '--account', MAIN_ACCOUNT_ID, '--json'], { tty: true });
    expect(json.code).toBe(0);
    expect(json.stderr).toBe('');
    expect(JSON.parse(json.stdout)).toHaveLength(250);
    const piped = await run(['media', '--all', '--metrics', 'reach', '--account', MAIN_ACCOUNT_ID, '--format', 'csv'], { tty: false });
    expect(piped.code).toBe(0);
    expect(piped.stderr).toBe('');
    expect(await cli.graph.graphCalls()).toBe(6);
  });
});

describe('insights account on a terminal', () => {
  it('shows the 30-day windows read of the total', async () => {
    await cli.start({ media: 1 });
    const result = await run(['account', '--metrics', 'reach', '--since', '90d', '--account', MAIN_ACCOUNT_ID], { tty: true });
    expect(result.code, result.stderr).toBe(0);
    expect(drawn(result.stderr)[0]).toBe('reading account insights · windows 0/3 (0%)');
  });
});
