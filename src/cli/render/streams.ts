/**
 * The streams a command writes to and reads from, as the renderers see
 * them: the real process's (terminal/stdio.ts, context.ts) or a test's.
 */
export interface OutStream {
  write(chunk: string): unknown;
  isTTY?: boolean | undefined;
  columns?: number | undefined;
}

export interface InStream extends AsyncIterable<Buffer | string> {
  isTTY?: boolean | undefined;
}

export interface Io {
  stdout: OutStream;
  stderr: OutStream;
  stdin: InStream;
}
