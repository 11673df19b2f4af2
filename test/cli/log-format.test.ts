/** serve's pretty log (a terminal's view of its JSON lines): what a request put in a field is shown, never obeyed. */
import { describe, expect, it } from 'vitest';
import { Chalk } from 'chalk';
import { LogFormatter } from '../../src/cli/render/log-format.js';

describe('LogFormatter', () => {
  it('shows the control characters of a field or a message as \\xHH, and keeps its own colours', () => {
    const formatter = new LogFormatter({ color: new Chalk({ level: 1 }) });
    const line = formatter.format({
      sequence: 1,
      time: new Date('2026-11-28T12:00:00Z'),
      level: 30,
      levelName: 'info',
      component: 'relay',
      message: 'unlink callback recorded\u001b[2J',
      fields: { userKey: 7, referrer: 'X\u001b]0;PWNED\u0007\u009b31mY', plain: 'UNLINK' },
    })!;
    const text = line.replace(/\u001b\[[0-9;]*m/g, '');
    expect(text).toBe('12:00:00.000 INFO  relay    unlink callback recorded\\x1b[2J userKey=7 referrer="X\\u001b]0;PWNED\\u0007\\x9b31mY" plain=UNLINK');
    expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    // The level's colour is still there: only text from the record is escaped.
    expect(line).toContain('\u001b[32mINFO ');
  });
});
