/**
 * The quick path (src/cli/quick.ts, bundled into dist/quick by
 * `npm run build`): which command lines it serves, that it prints exactly
 * what the full CLI prints for each of them, and its direct stdio
 * (src/cli/terminal/stdio.ts), down to the errors a pipe can give.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { servesQuickly } from '../../src/cli/quick.js';
import { FdIn, FdOut, type StdioCalls } from '../../src/cli/terminal/stdio.js';
import { BIN, launch, ROOT, traceLoads, type Launched, type LaunchOptions } from '../helpers/launcher.js';
import { AAD_HEX, KEY_HEX, PLAIN_USER, envelope, seal, sealedUser } from '../helpers/vectors.js';

const root = ROOT;
const bin = BIN;
const full = join(root, 'test', 'fixtures', 'full-cli.mjs');
let home: string;

const tokens = {
  tokenType: 'Bearer',
  accessToken: 'eyJhbGciOiJIUzI1NiJ9.access-token-of-the-quick-test',
  accessTokenExpiresAt: '2099-01-01T00:00:00.000Z',
  refreshToken: 'refresh-token-of-the-quick-test-0123456789',
  refreshTokenExpiresAt: '2099-01-01T00:00:00.000Z',
  scope: 'user_name user_phone',
  referrer: 'DEFAULT',
};

beforeAll(() => {
  if (!existsSync(join(root, 'dist', 'quick', 'cli.cjs'))) throw new Error('dist/quick is missing: run `npm run build` (npm test does)');
  home = mkdtempSync(join(tmpdir(), 'miniapp-quick-'));
  mkdirSync(join(home, 'config'), { recursive: true });
  const profiles = {
    default: { settings: { 'base-url': 'https://partner.example.com', 'decrypt-key': KEY_HEX, 'decrypt-aad': AAD_HEX }, tokens },
    empty: { settings: { 'path-prefix': '/v2' } },
  };
  writeFileSync(join(home, 'config', 'config.json'), JSON.stringify({ profiles }, null, '\t'), { mode: 0o600 });
  writeFileSync(join(home, 'response.json'), JSON.stringify(envelope(sealedUser())));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function run(entry: string, args: readonly string[], options: LaunchOptions = {}): Launched {
  return launch(home, args, { ...options, entry, cwd: home });
}

/** `(59m 59s left)`: the one thing that may change between two runs a moment apart. */
const timeLeft = (text: string) => text.replace(/\((?:\d+[dhms] ?)+ (?:left|ago)\)|(?:\d+[dhms] ?)+ (?:left|ago)/g, '(TIME)');

const input = JSON.stringify(envelope(sealedUser()));
const env = { MINIAPP_DECRYPT_KEY: KEY_HEX, MINIAPP_DECRYPT_AAD: AAD_HEX };

/** Command lines the quick path serves, with what they need; each runs through the quick path and the full CLI. */
const CASES: { args: string[]; env?: Record<string, string>; input?: string }[] = [
  { args: [] },
  { args: ['--help'] },
  { args: ['help'] },
  { args: ['--version'] },
  { args: ['--bogus'] },
  { args: ['--json', '--bogus'] },
  { args: ['help', 'decrypt'] },
  { args: ['help', 'config', 'get'] },
  { args: ['config', 'get', 'base-url'] },
  { args: ['config', 'get', 'base-url', '--json'] },
  { args: ['--no-color', 'config', 'get', 'base-url'] },
  { args: ['config', 'get', 'base-url'], env: { MINIAPP_BASE_URL: 'https://env.example.com' } },
  { args: ['config', 'get', 'decrypt-key'] },
  { args: ['config', 'get', 'decrypt-key', '--reveal'] },
  { args: ['config', 'get', 'decrypt-key', '--json'] },
  { args: ['config', 'get', 'path-prefix'] },
  { args: ['config', 'get', 'path-prefix'], env: { FORCE_COLOR: '1' } },
  { args: ['config', 'get', 'path-prefix', '--json'] },
  { args: ['config', 'get', 'path-prefix', '--profile', 'empty'] },
  { args: ['--profile', 'typo', 'config', 'get', 'base-url'] },
  { args: ['config', 'get', 'base-url'], env: { MINIAPP_PROFILE: 'bad name!' } },
  { args: ['config', 'get', 'graph-token'] },
  { args: ['config', 'get', 'no-such-setting'] },
  { args: ['config', 'get'] },
  { args: ['config', 'get', 'base-url', 'extra'] },
  { args: ['config', 'get', '--bogus', 'base-url'] },
  { args: ['config', 'get', '--help'] },
  { args: ['token', 'show'] },
  { args: ['token', 'show', '--json'] },
  { args: ['token', 'show', '--reveal'] },
  { args: ['token', 'show', '--profile', 'empty'] },
  { args: ['token', 'show', '--profile', 'empty', '--json'] },
  { args: ['token', 'show', '--help'] },
  { args: ['decrypt', '--json'], env, input },
  { args: ['decrypt'], env, input },
  { args: ['decrypt', '-'], env, input },
  { args: ['decrypt', 'response.json', '--json'] },
  { args: ['decrypt', 'no-such-file.json'] },
  { args: ['decrypt', '--json'], env: { ...env, MINIAPP_DECRYPT_AAD: '00ff' }, input },
  { args: ['decrypt', '--json'], env: { ...env, MINIAPP_DECRYPT_KEY: KEY_HEX.slice(2) }, input },
  { args: ['decrypt'], env, input: '' },
  { args: ['decrypt'], env, input: '{"resultType": ' },
  { args: ['decrypt', '--value', seal(PLAIN_USER.name)], env },
  { args: ['decrypt', '--value', 'not base64!'], env },
  { args: ['decrypt', '--value', seal('x'), 'response.json'], env },
  { args: ['decrypt', '--help'] },
];

describe('the quick path', () => {
  it('serves --help, config get, token show and decrypt, and nothing else', () => {
    for (const { args } of CASES) expect(servesQuickly(args), args.join(' ')).toBe(true);
    const others = [
      ['__complete', 'con'],
      ['config'],
      ['config', '--help'],
      ['help', 'config'],
      ['config', 'set', 'base-url', 'https://x'],
      ['config', 'list'],
      ['config', '--json', 'get', 'base-url'],
      ['token', 'exchange', '--code', 'c'],
      ['token'],
      ['serve'],
      ['users', 'get', '1'],
      ['--profile', 'p', 'users', 'list'],
      ['help', 'users'],
      ['help', '--json', 'users'],
      ['serv'],
    ];
    for (const args of others) expect(servesQuickly(args), args.join(' ')).toBe(false);
  });

  it.each(CASES.map((c) => [c.args.join(' ') || '(no arguments)', c] as const))('prints what the full CLI prints: %s', (_name, c) => {
    const quick = run(bin, c.args, c);
    const reference = run(full, c.args, c);
    expect({ ...quick, stdout: timeLeft(quick.stdout) }).toEqual({ ...reference, stdout: timeLeft(reference.stdout) });
  });

  it('gives the decrypted fields and exit codes a user relies on', () => {
    const json = run(bin, ['decrypt', '--json'], { env, input });
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ ...PLAIN_USER, di: null });
    expect(run(bin, ['config', 'get', 'base-url']).stdout).toBe('https://partner.example.com\n');
    expect(run(bin, ['config', 'get', 'decrypt-key']).code).toBe(2);
    expect(run(bin, ['config', 'get', 'graph-token']).code).toBe(4);
    expect(run(bin, ['decrypt', '--json'], { env: { ...env, MINIAPP_DECRYPT_AAD: '00ff' }, input }).code).toBe(3);
  });

  it('writes into a file as into a pipe', () => {
    const out = join(home, 'help.txt');
    const result = spawnSync('sh', ['-c', `"${process.execPath}" "${bin}" --help > "${out}"; echo $?`], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: home },
    });
    expect(result.stdout).toBe('0\n');
    expect(readFileSync(out, 'utf8')).toBe(run(full, ['--help']).stdout);
  });

  it('loads one bundle and no module of the ESM build, nor anything heavy it does not need', () => {
    const loads = (args: string[], options: LaunchOptions = {}) => traceLoads(home, args, options).loaded;
    for (const [args, options] of [
      [['--help'], {}],
      [['config', 'get', 'base-url'], {}],
      [['token', 'show', '--json'], {}],
      [['decrypt', '--json'], { env, input }],
    ] as const) {
      const loaded = loads([...args], options);
      // Node's own modules aside, and the launcher itself (the trace sees the main module resolved as a URL).
      const ours = loaded.filter((entry) => !/^require:(node:)?[a-z_/]+$/.test(entry) && entry !== pathToFileURL(bin).href && entry !== `require:${bin}`);
      // The launcher, then the bundle's entry and chunks, all by require.
      expect(ours[0], args.join(' ')).toBe('require:../dist/quick/cli.cjs');
      expect(
        ours.slice(1).every((entry) => /^require:\.\/[\w-]+\.cjs$/.test(entry)),
        `${args.join(' ')}: ${ours.join(', ')}`,
      ).toBe(true);
      // The config writer (conf), the renderers and chalk are chunks of their own, loaded only when used.
      expect(ours.filter((entry) => /store-|ora-|string-width-|source-/.test(entry))).toEqual([]);
    }
    expect(loads(['--help'])).not.toContain('require:node:crypto');
    expect(loads(['--help']).filter((entry) => /config-|decrypt-|token-|profile-/.test(entry))).toEqual([]);
  });
});

/** Fake system calls: a pipe whose writes and reads go as the test says. */
function calls(overrides: Partial<StdioCalls> & { kind?: 'fifo' | 'file' | 'tty' }): StdioCalls {
  const kind = overrides.kind ?? 'fifo';
  return {
    fstatSync: () => ({ isFIFO: () => kind === 'fifo', isFile: () => kind === 'file' }),
    writeSync: overrides.writeSync ?? ((_fd, buffer, offset) => buffer.length - offset),
    readSync: overrides.readSync ?? (() => 0),
  };
}

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

function fakeStream() {
  const written: string[] = [];
  return {
    written,
    stream: {
      write: (chunk: string | Uint8Array) => {
        written.push(Buffer.from(chunk).toString());
        return true;
      },
      isTTY: true,
      columns: 123,
    },
  };
}

describe('direct stdout and stderr', () => {
  it('writes a pipe with system calls, in as many writes as the pipe takes, and never creates the stream', () => {
    const chunks: string[] = [];
    let created = 0;
    const out = new FdOut(
      1,
      () => {
        created++;
        return fakeStream().stream;
      },
      () => undefined,
      calls({
        writeSync: (_fd, buffer, offset) => {
          const end = Math.min(buffer.length, offset + 3);
          chunks.push(buffer.subarray(offset, end).toString());
          return end - offset;
        },
      }),
    );
    out.write('héllo\n');
    expect(chunks.join('')).toBe('héllo\n');
    expect(chunks.length).toBeGreaterThan(1);
    expect(out.isTTY).toBe(false);
    expect(out.columns).toBeUndefined();
    expect(created).toBe(0);
  });

  it('hands the rest to the stream, in order, once the pipe says EAGAIN', () => {
    const { written, stream } = fakeStream();
    let calls_ = 0;
    const out = new FdOut(
      1,
      () => stream,
      () => undefined,
      calls({
        writeSync: () => {
          calls_++;
          if (calls_ === 1) return 4;
          throw errno('EAGAIN');
        },
      }),
    );
    out.write('abcdefgh');
    out.write('ij');
    expect(written).toEqual(['efgh', 'ij']);
  });

  it('goes quiet once the reader has gone (EPIPE), telling the command once', () => {
    let closed = 0;
    let attempts = 0;
    const out = new FdOut(
      1,
      () => fakeStream().stream,
      () => closed++,
      calls({
        writeSync: () => {
          attempts++;
          throw errno('EPIPE');
        },
      }),
    );
    out.write('a');
    out.write('b');
    expect({ closed, attempts }).toEqual({ closed: 1, attempts: 1 });
  });

  it('throws any other write error', () => {
    const out = new FdOut(
      1,
      () => fakeStream().stream,
      () => undefined,
      calls({
        writeSync: () => {
          throw errno('EIO');
        },
      }),
    );
    expect(() => out.write('a')).toThrow('EIO');
  });

  it('leaves a terminal (or a socket) to the process stream', () => {
    const { written, stream } = fakeStream();
    const out = new FdOut(
      1,
      () => stream,
      () => undefined,
      calls({
        kind: 'tty',
        writeSync: () => {
          throw new Error('no direct write to a terminal');
        },
      }),
    );
    out.write('x');
    expect(written).toEqual(['x']);
    expect(out.isTTY).toBe(true);
    expect(out.columns).toBe(123);
  });
});

describe('direct stdin', () => {
  async function readAll(input: FdIn): Promise<string> {
    let text = '';
    for await (const chunk of input) text += chunk.toString();
    return text;
  }

  it('reads a pipe to its end with system calls', async () => {
    const parts = [Buffer.from('{"a":'), Buffer.from('1}')];
    const input = new FdIn(
      () => {
        throw new Error('the stream is not needed');
      },
      calls({
        readSync: (_fd, buffer) => {
          const part = parts.shift();
          if (!part) return 0;
          part.copy(buffer);
          return part.length;
        },
      }),
    );
    expect(input.isTTY).toBe(false);
    expect(await readAll(input)).toBe('{"a":1}');
  });

  it('reads the rest from the stream once the pipe says EAGAIN', async () => {
    let first = true;
    const stream = Object.assign(
      (async function* () {
        yield Buffer.from('rest');
      })(),
      { isTTY: false, destroy: () => undefined },
    ) as unknown as NodeJS.ReadStream;
    const input = new FdIn(
      () => stream,
      calls({
        readSync: (_fd, buffer) => {
          if (!first) throw errno('EAGAIN');
          first = false;
          buffer.write('first-');
          return 6;
        },
      }),
    );
    expect(await readAll(input)).toBe('first-rest');
  });
});
