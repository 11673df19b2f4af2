/**
 * Runs the whole CLI in-process with captured streams, a temp config dir
 * and a fixed clock, the way ARCHITECTURE.md asks: `runCli(argv, ctx)`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { runCli } from '../../src/cli/main.js';
import type { Context } from '../../src/cli/context.js';
import type { InStream, OutStream } from '../../src/cli/render/streams.js';

export class Capture implements OutStream {
  text = '';
  constructor(
    public isTTY = false,
    public columns = 120,
  ) {}
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
  // What ora asks of a terminal stream.
  cursorTo(): boolean {
    return true;
  }
  moveCursor(): boolean {
    return true;
  }
  clearLine(): boolean {
    return true;
  }
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  stdin?: string;
  /** Whether stdout and stderr are terminals (default: piped). */
  tty?: boolean;
  /** The width both terminals report (default 120). */
  columns?: number;
  /** Whether stdin is a terminal (default: a pipe when `stdin` is given, a terminal otherwise). */
  stdinTTY?: boolean;
  now?: Date;
  /** Resolves when a long-running command (sandbox, serve) should stop; default: never. */
  shutdown?: Promise<string>;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

function stdinOf(options: RunOptions): InStream {
  const stream = Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin)]) as Readable & InStream;
  stream.isTTY = options.stdinTTY ?? options.stdin === undefined;
  return stream;
}

/** A temp home: config dir, data dir and HOME all inside it, removed by `dispose`. */
export class Sandbox {
  readonly root = mkdtempSync(join(tmpdir(), 'miniapp-test-'));
  readonly configDir = join(this.root, 'config');
  readonly env: Record<string, string | undefined> = {
    MINIAPP_CONFIG_DIR: this.configDir,
    MINIAPP_DATA_DIR: join(this.root, 'data'),
  };

  async run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
    const stdout = new Capture(options.tty ?? false, options.columns);
    const stderr = new Capture(options.tty ?? false, options.columns);
    const ctx: Context = {
      io: { stdout, stderr, stdin: stdinOf(options) },
      env: { ...this.env, ...options.env },
      homedir: this.root,
      now: () => options.now ?? new Date(),
      version: '9.9.9-test',
      waitForShutdown: () => options.shutdown ?? new Promise<string>(() => {}),
    };
    const code = await runCli(argv, ctx);
    return { code, stdout: stdout.text, stderr: stderr.text };
  }

  dispose(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** Removes ANSI colour codes. */
export function plain(text: string): string {
  return text.replace(/\u001b\[[0-9;]*m/g, '');
}
