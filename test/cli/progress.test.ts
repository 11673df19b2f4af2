import { beforeAll, describe, expect, it } from 'vitest';
import { loadTextWidths } from '../../src/cli/render/cells.js';
import { ProgressLine } from '../../src/cli/render/progress.js';
import { Capture } from '../helpers/cli.js';

// createOutput loads the cell measure for a terminal; these tests build the line directly.
beforeAll(() => loadTextWidths());

function clock() {
  let t = 0;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

describe('the progress line', () => {
  it('shows done of total, the counts, the rate and the time left', () => {
    const c = clock();
    const line = new ProgressLine(new Capture(true, 120), true, { unit: 'rows', total: 3000, now: c.now });
    c.advance(2000);
    line.update({ done: 1000, counts: { created: 980, failed: 20 } });
    expect(line.text()).toBe('rows 1,000/3,000 (33%) · created 980 · failed 20 · 500/s · 4s left');
  });

  it('shows no total and no time left when the total is unknown (stdin)', () => {
    const c = clock();
    const line = new ProgressLine(new Capture(true, 120), true, { unit: 'rows', now: c.now });
    c.advance(1000);
    line.update({ done: 42 });
    expect(line.text()).toBe('rows 42 · 42/s');
  });

  it('redraws in place, cut three cells short of the terminal width (room for the echo of ^C), and puts logged lines above it', () => {
    const c = clock();
    const stream = new Capture(true, 30);
    const line = new ProgressLine(stream, true, { unit: 'rows', total: 10, now: c.now, label: 'importing a-very-long-file-name.csv' });
    line.update({ done: 1 });
    expect(stream.text).toMatch(/^\r\x1b\[2K.{26}…$/);
    line.log('line 3: bad row');
    expect(stream.text).toContain('\r\x1b[2Kline 3: bad row\n\r\x1b[2K');
    line.finish();
    expect(stream.text.endsWith('\r\x1b[2K')).toBe(true);
  });

  it('draws nothing when not live (piped, --json), but still passes logged lines', () => {
    const stream = new Capture(false);
    const line = new ProgressLine(stream, false, { unit: 'rows' });
    line.update({ done: 5 }, true);
    line.log('a failure');
    line.finish();
    expect(stream.text).toBe('a failure\n');
  });

  it('shows what a wait is for in place of the rate and the time left', () => {
    const c = clock();
    const line = new ProgressLine(new Capture(true, 120), true, { unit: 'pages', total: 10, now: c.now });
    c.advance(2000);
    line.update({ done: 4, counts: { media: 400 }, note: 'rate limited; retry 1 of 3 in 42s' });
    expect(line.text()).toBe('pages 4/10 (40%) · rate limited; retry 1 of 3 in 42s · media 400');
    line.update({ done: 4, counts: { media: 400 } });
    expect(line.text()).toBe('pages 4/10 (40%) · media 400 · 2.0/s · 3s left');
  });

  it('cuts the line by terminal cells, so a wide label does not wrap it', () => {
    const stream = new Capture(true, 20);
    const line = new ProgressLine(stream, true, { unit: 'rows', label: '日本語のファイル.csv' });
    line.update({ done: 1 }, true);
    const drawn = stream.text.replace('\r\x1b[2K', '');
    expect(drawn).toBe('日本語のファイル…');
  });
});
