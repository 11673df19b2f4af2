/**
 * A real terminal for tests of what a person sees: a tmux server on a
 * socket of its own (`tmux -L`), one detached session of a given size per
 * test, the pane read back with `capture-pane`. Waits poll the pane a
 * bounded number of times; nothing asserts on how long anything took.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

const run = (args: readonly string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile('tmux', args, { encoding: 'utf8' }, (error, stdout, stderr) =>
      error ? reject(new Error(`tmux ${args.join(' ')}: ${stderr || error.message}`)) : resolve(stdout),
    );
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class Tmux {
  readonly socket = `miniapp-test-${process.pid}-${randomBytes(4).toString('hex')}`;
  #sessions = 0;

  /** A detached session `width` x `height` running `command` (a shell line) with exactly `env` (and PATH, TERM). */
  async session(width: number, height: number, command: string, env: Record<string, string> = {}): Promise<Pane> {
    const name = `s${++this.#sessions}`;
    const environment = { PATH: process.env.PATH ?? '/usr/bin:/bin', TERM: 'xterm-256color', LANG: 'C.UTF-8', ...env };
    const exports = Object.entries(environment).map(([key, value]) => `${key}=${shellQuote(value)}`);
    await run([
      '-L',
      this.socket,
      '-f',
      '/dev/null',
      'new-session',
      '-d',
      '-s',
      name,
      '-x',
      String(width),
      '-y',
      String(height),
      `env -i ${exports.join(' ')} ${command}`,
    ]);
    // The window keeps its size whatever another session or a client would ask (resize-window makes it manual).
    await run(['-L', this.socket, 'resize-window', '-t', name, '-x', String(width), '-y', String(height)]);
    return new Pane(this.socket, name, width, height);
  }

  kill(): void {
    try {
      execFileSync('tmux', ['-L', this.socket, 'kill-server'], { stdio: 'ignore' });
    } catch {
      // no server left
    }
  }
}

export class Pane {
  constructor(
    readonly socket: string,
    readonly name: string,
    readonly width: number,
    readonly height: number,
  ) {}

  /** The visible screen, one string a row (trailing spaces trimmed). */
  async screen(): Promise<string[]> {
    const text = await run(['-L', this.socket, 'capture-pane', '-p', '-t', this.name]);
    return text
      .replace(/\n$/, '')
      .split('\n')
      .map((line) => line.trimEnd());
  }

  /** The visible screen with its colours and attributes as escape sequences (-e), one string a row. */
  async styled(): Promise<string[]> {
    const text = await run(['-L', this.socket, 'capture-pane', '-p', '-e', '-t', this.name]);
    return text.replace(/\n$/, '').split('\n');
  }

  /** Everything written, history included, with lines the terminal wrapped joined again (-J). */
  async joined(): Promise<string[]> {
    const text = await run(['-L', this.socket, 'capture-pane', '-p', '-J', '-S', '-', '-t', this.name]);
    return text
      .replace(/\n$/, '')
      .split('\n')
      .map((line) => line.trimEnd());
  }

  /** tmux's own view of the pane: `#{alternate_on} #{cursor_flag}` and the like. */
  async format(format: string): Promise<string> {
    return (await run(['-L', this.socket, 'display-message', '-p', '-t', this.name, format])).trim();
  }

  /** The window made `width` x `height`, as a person resizing the terminal. */
  async resize(width: number, height: number): Promise<void> {
    await run(['-L', this.socket, 'resize-window', '-t', this.name, '-x', String(width), '-y', String(height)]);
  }

  async keys(...keys: string[]): Promise<void> {
    await run(['-L', this.socket, 'send-keys', '-t', this.name, ...keys]);
  }

  /** Polls the screen until `test` holds (every `everyMs`, at most `tries` times); throws with the last screen otherwise. */
  async waitFor<T>(what: string, test: (screen: string[]) => T | undefined | false, { tries = 300, everyMs = 100 } = {}): Promise<T> {
    let last: string[] = [];
    for (let i = 0; i < tries; i++) {
      last = await this.screen();
      const found = test(last);
      if (found !== undefined && found !== false) return found;
      await sleep(everyMs);
    }
    throw new Error(`the pane never showed ${what}; it shows:\n${last.join('\n')}`);
  }
}

export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
