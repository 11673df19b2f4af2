/**
 * Standard streams for the short commands of the quick path (quick.ts):
 * written and read with plain system calls when they are a pipe or a file.
 *
 * `process.stdout` on a pipe is a net.Socket: creating it loads Node's
 * net, stream and tty modules, which costs a command that prints a line and
 * exits a measurable share of its whole run. A pipe or a file takes a
 * blocking write as well; Node itself writes files synchronously. Anything
 * else (a terminal, a socket, /dev/null) goes to the process's own stream,
 * created on first use, exactly as before. So does the rest of the output
 * once a pipe answers EAGAIN (its other end made it non-blocking), so that
 * nothing is lost or reordered.
 *
 * A reader that closed the pipe (`| head -1`) stops the writes silently, by
 * the rule of context.ts (quietOnClosedPipe) for the process streams.
 */
import { fstatSync, readSync, writeSync } from 'node:fs';
import type { InStream, Io, OutStream } from '../render/streams.js';
import { quietOnClosedPipe } from '../context.js';

type Mode = 'direct' | 'stream' | 'closed';

/** The system calls used, replaceable in tests (EAGAIN and EPIPE cannot be had on demand). */
export interface StdioCalls {
  fstatSync: (fd: number) => { isFIFO(): boolean; isFile(): boolean };
  writeSync: (fd: number, buffer: Buffer, offset: number) => number;
  readSync: (fd: number, buffer: Buffer, offset: number, length: number, position: null) => number;
}

const SYSTEM: StdioCalls = { fstatSync, writeSync, readSync };

/** A pipe or a regular file: safe to write (or read) with a blocking system call. */
function isDirect(fd: number, calls: StdioCalls): boolean {
  try {
    const info = calls.fstatSync(fd);
    return info.isFIFO() || info.isFile();
  } catch {
    return false;
  }
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** stdout or stderr: written directly while it is a pipe or a file that takes the writes, else through `stream`. */
export class FdOut implements OutStream {
  #mode: Mode | undefined;

  constructor(
    private readonly fd: number,
    private readonly stream: () => Pick<NodeJS.WriteStream, 'write' | 'isTTY' | 'columns'>,
    private readonly onClosed: () => void,
    private readonly calls: StdioCalls = SYSTEM,
  ) {}

  get #current(): Mode {
    this.#mode ??= isDirect(this.fd, this.calls) ? 'direct' : 'stream';
    return this.#mode;
  }

  get isTTY(): boolean {
    return this.#current === 'stream' && Boolean(this.stream().isTTY);
  }

  get columns(): number | undefined {
    return this.#current === 'stream' ? this.stream().columns : undefined;
  }

  write(chunk: string): boolean {
    const mode = this.#current;
    if (mode === 'closed') return true;
    if (mode === 'stream') return this.stream().write(chunk);
    const bytes = Buffer.from(chunk, 'utf8');
    let written = 0;
    try {
      while (written < bytes.length) written += this.calls.writeSync(this.fd, bytes, written);
      return true;
    } catch (error) {
      const code = errorCode(error);
      if (code === 'EAGAIN') {
        this.#mode = 'stream';
        return this.stream().write(bytes.subarray(written));
      }
      if (code === 'EPIPE') {
        this.#mode = 'closed';
        this.onClosed();
        return true;
      }
      throw error;
    }
  }
}

/** stdin: read directly while it is a pipe or a file that gives its bytes that way, else from `stream`. */
export class FdIn implements InStream {
  #direct: boolean | undefined;
  #streamUsed = false;

  constructor(
    private readonly stream: () => NodeJS.ReadStream = () => process.stdin,
    private readonly calls: StdioCalls = SYSTEM,
  ) {}

  get #isDirect(): boolean {
    this.#direct ??= isDirect(0, this.calls);
    return this.#direct;
  }

  get isTTY(): boolean {
    return !this.#isDirect && Boolean(this.stream().isTTY);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer | string> {
    if (this.#isDirect) {
      for (;;) {
        const buffer = Buffer.allocUnsafe(64 * 1024);
        let read: number;
        try {
          read = this.calls.readSync(0, buffer, 0, buffer.length, null);
        } catch (error) {
          if (errorCode(error) === 'EAGAIN') break; // a non-blocking pipe: the stream reads the rest
          if (errorCode(error) === 'EOF') return;
          throw error;
        }
        if (read === 0) return;
        yield buffer.subarray(0, read);
      }
    }
    this.#streamUsed = true;
    yield* this.stream();
  }

  /** Lets go of stdin (see destroyInput in input.ts): only the process stream holds anything. */
  destroy(): void {
    if (this.#streamUsed) this.stream().destroy();
  }
}

/**
 * The quick path's Io: stdout and stderr written directly when they are a
 * pipe or a file, stdin read directly when it is. `onStdoutClosed` runs once
 * when the reader of stdout goes away.
 */
export function directIo(onStdoutClosed: () => void): Io {
  let stdout: NodeJS.WriteStream | undefined;
  let stderr: NodeJS.WriteStream | undefined;
  return {
    stdout: new FdOut(1, () => (stdout ??= quietOnClosedPipe(process.stdout, onStdoutClosed)), onStdoutClosed),
    stderr: new FdOut(
      2,
      () => (stderr ??= quietOnClosedPipe(process.stderr)),
      () => undefined,
    ),
    stdin: new FdIn(),
  };
}
