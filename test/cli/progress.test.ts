import { describe, expect, it } from 'vitest';
import { ProgressLine } from '../../src/cli/progress.js';
import { Capture } from '../helpers/cli.js';

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
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

  it('redraws in place, cut to the terminal width, and puts logged lines above it', () => {
    const c = clock();
    const stream = new Capture(true, 30);
    const line = new ProgressLine(stream, true, { unit: 'rows', total: 10, now: c.now, label: 'importing a-very-long-file-name.csv' });
    line.update({ done: 1 });
    expect(stream.text).toMatch(/^\r\x1b\[2K.{28}…$/);
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
});
