/**
 * A stream that outlives its connection: `miniapp monitor metrics` and
 * `monitor logs -f` (and anything else that follows a server stream) run
 * it again on a fresh connection when serve restarts or the network drops,
 * with exponential back-off. The first connection must succeed (a wrong
 * address fails at once); after that, UNAVAILABLE (a stopping serve ends
 * its streams so, and a lost connection reads so), DEADLINE_EXCEEDED,
 * CANCELLED by the other side, and a stream the server ended early are
 * retried. Each attempt is a new client, so a load balancer in front of
 * several instances routes it anew. No grpc-js import: the errors come
 * mapped (errors.ts).
 */
import { statusOf } from './errors.js';

/** Statuses after which a stream that was connected tries again. */
const RECONNECT_STATUSES: ReadonlySet<string> = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'CANCELLED']);

export interface Reconnectable {
  /** Resolves once connected (rejects past the connect time limit). */
  ready(): Promise<void>;
  close(): void;
}

export interface ReconnectOptions<Client extends Reconnectable> {
  signal: AbortSignal;
  /** A fresh client per attempt. */
  connect: () => Client;
  /** One run of the stream on `client`: 'done' when the command has what it wanted, 'again' when the server ended the stream early. */
  run: (client: Client, signal: AbortSignal) => Promise<'done' | 'again'>;
  /** After each connection; `reconnected` is false the first time. */
  onConnected?: (info: { reconnected: boolean }) => void;
  /** Before each wait to reconnect. */
  onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
  /** First wait before reconnecting (default 250 ms), doubled per failed attempt up to `maxDelayMs` (10 s). */
  baseDelayMs?: number | undefined;
  maxDelayMs?: number | undefined;
  /**
   * The stream was connected, on another client (the light path), and lost for this reason: the first attempt
   * is a reconnection, after its notice and the first wait, as if it had been lost here.
   */
  lostBefore?: string | undefined;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** `promise`, or undefined as soon as `signal` aborts (a Ctrl-C while connecting ends the wait at once). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Runs the stream until it is done or `signal` aborts, reconnecting as the file comment says. */
export async function withReconnects<Client extends Reconnectable>(options: ReconnectOptions<Client>): Promise<void> {
  const base = options.baseDelayMs ?? 250;
  const max = Math.max(base, options.maxDelayMs ?? 10_000);
  const { signal } = options;
  let connectedBefore = options.lostBefore !== undefined;
  let delay = base;
  let attempt = 0;
  if (options.lostBefore !== undefined) {
    attempt++;
    options.onRetry?.({ attempt, delayMs: delay, reason: options.lostBefore });
    await sleep(delay, signal);
    delay = Math.min(delay * 2, max);
  }
  while (!signal.aborted) {
    const client = options.connect();
    let reason: string;
    try {
      await abortable(client.ready(), signal);
      if (signal.aborted) return;
      options.onConnected?.({ reconnected: connectedBefore });
      connectedBefore = true;
      delay = base;
      attempt = 0;
      if ((await options.run(client, signal)) === 'done' || signal.aborted) return;
      reason = 'the server ended the stream';
    } catch (error) {
      if (signal.aborted) return;
      const status = statusOf(error);
      if (!connectedBefore || status === undefined || !RECONNECT_STATUSES.has(status)) throw error;
      reason = error instanceof Error ? error.message : String(error);
    } finally {
      client.close();
    }
    attempt++;
    options.onRetry?.({ attempt, delayMs: delay, reason });
    await sleep(delay, signal);
    delay = Math.min(delay * 2, max);
  }
}
