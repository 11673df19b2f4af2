import { describe, expect, it } from 'vitest';
import { resolveColorLevel } from '../../src/cli/render/color.js';
import { createOutput, fitColumns, maskSecret, tableChrome, type Output } from '../../src/cli/render/output.js';
import { textWidth, truncateToWidth } from '../../src/cli/render/text-width.js';
import { Capture, plain } from '../helpers/cli.js';
import { Readable } from 'node:stream';

async function outputFor(options: { tty: boolean; json?: boolean; env?: Record<string, string> }) {
  const stdout = new Capture(options.tty);
  const stderr = new Capture(options.tty);
  const out: Output = await createOutput({ stdout, stderr, stdin: Readable.from([]) }, { json: options.json ?? false, noColor: false, env: options.env ?? {} });
  return { out, stdout, stderr };
}

const rows = [
  { id: 1, name: 'alpha', tags: ['a', 'b'], note: 'tab\there' },
  { id: 2, name: 'beta', tags: [], note: null },
];
const columns = [
  { header: 'id', value: (r: (typeof rows)[number]) => r.id },
  { header: 'name', value: (r: (typeof rows)[number]) => r.name },
  { header: 'note', value: (r: (typeof rows)[number]) => r.note },
];

describe('resolveColorLevel', () => {
  const tty = { noColorFlag: false, isTTY: true };
  it.each([
    [{ ...tty, env: {} }, 1],
    [{ ...tty, env: { TERM: 'xterm-256color' } }, 2],
    [{ ...tty, env: { COLORTERM: 'truecolor' } }, 3],
    [{ ...tty, env: { TERM: 'dumb' } }, 0],
    [{ ...tty, env: { NO_COLOR: '1' } }, 0],
    [{ ...tty, env: { NO_COLOR: '' } }, 1],
    [{ ...tty, noColorFlag: true, env: { FORCE_COLOR: '3' } }, 0],
    [{ noColorFlag: false, isTTY: false, env: {} }, 0],
    [{ noColorFlag: false, isTTY: false, env: { FORCE_COLOR: '1' } }, 1],
    [{ noColorFlag: false, isTTY: false, env: { FORCE_COLOR: '' } }, 1],
    [{ noColorFlag: false, isTTY: false, env: { FORCE_COLOR: '2' } }, 2],
    [{ ...tty, env: { FORCE_COLOR: '0' } }, 0],
    [{ ...tty, env: { FORCE_COLOR: 'false' } }, 0],
    [{ noColorFlag: false, isTTY: false, env: { FORCE_COLOR: '1', NO_COLOR: '1' } }, 1],
    // --color: on whatever the stream and NO_COLOR, as deep as the terminal type says; --no-color still wins.
    [{ noColorFlag: false, colorFlag: true, isTTY: false, env: { NO_COLOR: '1' } }, 1],
    [{ noColorFlag: false, colorFlag: true, isTTY: true, env: { TERM: 'xterm-256color', FORCE_COLOR: '0' } }, 2],
    [{ noColorFlag: true, colorFlag: true, isTTY: true, env: {} }, 0],
  ])('%j gives level %i', (options, level) => {
    expect(resolveColorLevel(options)).toBe(level);
  });
});

describe('Output.table', () => {
  it('prints a table with a header on a TTY', async () => {
    const { out, stdout } = await outputFor({ tty: true });
    out.table(rows, columns);
    const text = plain(stdout.text);
    expect(text).toMatch(/│ id │ name +│ note +│/);
    expect(text).toMatch(/│ 1 +│ alpha │ tab here │/);
    expect(stdout.text).toContain('\u001b['); // coloured header on a TTY
  });

  it('prints tab-separated rows without a header when piped, with no colour', async () => {
    const { out, stdout } = await outputFor({ tty: false });
    out.table(rows, columns);
    expect(stdout.text).toBe('1\talpha\ttab here\n2\tbeta\t\n');
  });

  it('prints exact JSON with --json, even on a TTY', async () => {
    const { out, stdout } = await outputFor({ tty: true, json: true });
    out.table(rows, columns);
    expect(JSON.parse(stdout.text)).toEqual(rows);
  });

  it('honours NO_COLOR on a TTY', async () => {
    const { out, stdout } = await outputFor({ tty: true, env: { NO_COLOR: '1' } });
    out.table(rows, columns);
    expect(stdout.text).not.toContain('\u001b[');
  });

  it('cuts long cells on a TTY only', async () => {
    const long = [{ text: 'x'.repeat(100) }];
    const cols = [{ header: 'text', value: (r: { text: string }) => r.text, maxWidth: 10 }];
    const tty = await outputFor({ tty: true });
    tty.out.table(long, cols);
    expect(plain(tty.stdout.text)).toContain(`${'x'.repeat(9)}…`);
    const piped = await outputFor({ tty: false });
    piped.out.table(long, cols);
    expect(piped.stdout.text).toBe(`${'x'.repeat(100)}\n`);
  });
});

describe('text width', () => {
  it.each([
    ['plain', 5],
    ['日本語', 6],
    ['ｆｕｌｌ', 8],
    ['한국어', 6],
    ['🌊 wave', 7],
    ['👩‍👩‍👧', 2],
    ['🇯🇵', 2],
    ['❤️', 2],
    ['e\u0301te\u0301', 3],
    ['\u001b[1mbold\u001b[22m', 4],
    ['\u001b]8;;https://x.example\u0007link\u001b]8;;\u0007', 4],
    ['…·─', 3],
  ])('%j takes %i cells', (text, width) => {
    expect(textWidth(text)).toBe(width);
  });

  it('cuts by cells, never inside a wide character or a colour code, and resets a cut colour', () => {
    expect(truncateToWidth('日本語のテキスト', 6)).toBe('日本…');
    expect(truncateToWidth('ab🌊cd', 4)).toBe('ab…');
    expect(truncateToWidth('short', 5)).toBe('short');
    expect(truncateToWidth('\u001b[31mred text\u001b[39m', 5)).toBe('\u001b[31mred \u001b[0m…');
    expect(truncateToWidth('anything', 0)).toBe('');
  });
});

describe('fitColumns', () => {
  const widths = (columns: { header: number; data: number; shrink: number; minWidth?: number }[], width: number) => fitColumns(columns, width);

  it('leaves a table that fits as it is', () => {
    expect(
      widths(
        [
          { header: 2, data: 5, shrink: -1 },
          { header: 7, data: 30, shrink: 2 },
        ],
        80,
      ),
    ).toEqual([5, 30]);
  });

  it('cuts the highest priority first, down to its minimum, before the next', () => {
    const columns = [
      { header: 2, data: 16, shrink: -1 },
      { header: 7, data: 60, shrink: 2 },
      { header: 9, data: 48, shrink: 1 },
      { header: 5, data: 9, shrink: 0 },
    ];
    const at = (width: number) => widths(columns, width);
    expect(at(100)).toEqual([16, 60 - (16 + 60 + 48 + 9 + tableChrome(4) - 100), 48, 9]);
    expect(at(80)).toEqual([16, 8, 80 - tableChrome(4) - 16 - 8 - 9, 9]);
    // Still too narrow: the same order again, down to an ellipsis; the first column (the row's name) last.
    expect(at(40)).toEqual([16, 1, 40 - tableChrome(4) - 16 - 1 - 8, 8]);
    const narrowest = at(20);
    expect(narrowest.reduce((a, b) => a + b, 0) + tableChrome(4)).toBe(20);
  });

  it('keeps a header whole unless it alone makes the column wide', () => {
    // comments_count over two-digit counts may become "comment…"; a caption column keeps "caption".
    expect(
      widths(
        [
          { header: 14, data: 2, shrink: 0 },
          { header: 11, data: 40, shrink: 1 },
        ],
        8 + 11 + tableChrome(2),
      ),
    ).toEqual([8, 11]);
  });
});

describe('Output.table at the terminal width', () => {
  it('draws every line the same width, wide characters and all, within the terminal', async () => {
    const stdout = new Capture(true, 30);
    const out = await createOutput({ stdout, stderr: new Capture(true), stdin: Readable.from([]) }, { json: false, noColor: true, env: {} });
    out.table(
      [
        { id: 1, text: '日本語のキャプションです' },
        { id: 2, text: 'family 👩‍👩‍👧 and flag 🇯🇵' },
        { id: 3, text: 'ok' },
      ],
      [
        { header: 'id', value: (r: { id: number }) => r.id },
        { header: 'text', value: (r: { text: string }) => r.text, shrink: 1 },
      ],
    );
    const lines = stdout.text.trimEnd().split('\n');
    expect(lines.map(textWidth)).toEqual(lines.map(() => 30));
    expect(lines[2]).toBe('│ 1  │ 日本語のキャプション… │');
  });
});

describe('Output.csv', () => {
  it('writes RFC 4180: header, CRLF, quotes doubled, commas and newlines quoted', async () => {
    const { out } = await outputFor({ tty: false });
    const csv = out.csv(
      [
        { id: '1', caption: 'Hello, "world"\nsecond line' },
        { id: '2', caption: '' },
      ],
      [
        { header: 'id', value: (r: { id: string }) => r.id },
        { header: 'caption', value: (r: { caption: string }) => r.caption },
      ],
    );
    expect(csv).toBe('id,caption\r\n1,"Hello, ""world""\nsecond line"\r\n2,\r\n');
  });
});

describe('Output streams', () => {
  it('sends warnings to stderr and never to stdout', async () => {
    const { out, stdout, stderr } = await outputFor({ tty: false });
    out.warn('careful');
    expect(stdout.text).toBe('');
    expect(stderr.text).toBe('warning: careful\n');
  });

  it('shows no spinner when stderr is not a TTY or under --json', async () => {
    for (const options of [{ tty: false }, { tty: true, json: true }]) {
      const { out, stderr } = await outputFor(options);
      const spinner = await out.spinner('working');
      spinner.text('still working');
      spinner.succeed('done');
      expect(stderr.text).toBe('');
    }
  });

  it('shows no spinner on a terminal that reports no width', async () => {
    const stdout = new Capture(true);
    const stderr = new Capture(true, 0);
    const out = await createOutput({ stdout, stderr, stdin: Readable.from([]) }, { json: false, noColor: false, env: {} });
    const spinner = await out.spinner('working');
    spinner.succeed('done');
    expect(stderr.text).toBe('');
  });

  it('shows a spinner on a TTY stderr', async () => {
    const { out, stderr, stdout } = await outputFor({ tty: true });
    const spinner = await out.spinner('working');
    spinner.succeed('done');
    expect(plain(stderr.text)).toContain('done');
    expect(stdout.text).toBe('');
  });
});

describe('maskSecret', () => {
  it('shows the first and last four characters of a long secret', () => {
    expect(maskSecret('eyJhbGciOiJIUzI1NiJ9.payload.sig9x2Q')).toBe('eyJh...9x2Q');
  });
  it('hides short secrets entirely', () => {
    expect(maskSecret('short-secret')).toBe('****');
  });
});
