/**
 * Bounds on what one HTTP/2 connection may make the gRPC server do, which
 * grpc-js has no option for: streams the client resets (the rapid-reset
 * attack, CVE-2023-44487).
 *
 * Node's HTTP/2 library (nghttp2 1.57 and later) has a reset budget of its
 * own (a burst of 1,000, then 33 a second), but when it is spent, nghttp2
 * sends GOAWAY INTERNAL_ERROR and stops reading, and Node (20, 22) neither
 * tells the session nor closes its socket: the connection stays in
 * CLOSE-WAIT, one descriptor each, until the process runs out of them.
 * So the server counts resets itself, far below that budget, and closes a
 * session that spends its own: GOAWAY ENHANCE_YOUR_CALM (what grpc-go,
 * Envoy and nginx send), then the socket 250 ms later, and refuses new
 * connections from its address for a while (10 s, doubling per repeat up to
 * 10 minutes), so that reconnecting at once buys no fresh budget. The
 * keepalive pings and idle time-out of the gRPC server (server.ts) close
 * whatever else stops answering.
 */
import http2 from 'node:http2';

export interface ResetLimits {
  /** Resets within `windowMs` that a session may send before it is closed... */
  maxResets: number;
  /** ...as long as they are at most half the streams it opened in the window (a busy client cancels some calls). */
  windowMs: number;
  /** Between the GOAWAY and the socket's end: time for the client to read it. */
  graceMs: number;
  /**
   * How long new connections from the address of a session closed this way are refused at once (GOAWAY
   * ENHANCE_YOUR_CALM, then closed, before any stream is read); it doubles for each further close, up to
   * `maxPenaltyMs`. An attacker that reconnects at once otherwise makes serve parse thousands of streams a second
   * on fresh sessions, each under its budget until the budget is spent. 0 turns it off.
   */
  penaltyMs: number;
  maxPenaltyMs: number;
}

export const DEFAULT_RESET_LIMITS: ResetLimits = { maxResets: 100, windowMs: 10_000, graceMs: 250, penaltyMs: 10_000, maxPenaltyMs: 600_000 };

/** Addresses whose sessions were closed for their resets, each refused until its time; at most `capacity` kept. */
export class AddressPenalties {
  readonly #byAddress = new Map<string, { until: number; strikes: number }>();

  constructor(
    private readonly limits: Pick<ResetLimits, 'penaltyMs' | 'maxPenaltyMs'> = DEFAULT_RESET_LIMITS,
    private readonly capacity = 10_000,
  ) {}

  /** Counts a close against `address`: how long its new connections are now refused (ms). */
  strike(address: string, now = performance.now()): number {
    if (this.limits.penaltyMs <= 0) return 0;
    const last = this.#byAddress.get(address);
    // Strikes are forgotten once an address has behaved for twice the longest penalty.
    const strikes = last && now - last.until < 2 * this.limits.maxPenaltyMs ? last.strikes + 1 : 1;
    const penalty = Math.min(this.limits.penaltyMs * 2 ** Math.min(strikes - 1, 30), this.limits.maxPenaltyMs);
    this.#byAddress.delete(address);
    this.#byAddress.set(address, { until: now + penalty, strikes });
    // The oldest entry makes room: a flood of addresses cannot grow the table.
    if (this.#byAddress.size > this.capacity) this.#byAddress.delete(this.#byAddress.keys().next().value!);
    return penalty;
  }

  refuses(address: string, now = performance.now()): boolean {
    const entry = this.#byAddress.get(address);
    return entry !== undefined && now < entry.until;
  }
}

export interface ClosedSession {
  /** The client's address and port, as the socket had them. */
  peer: string;
  resets: number;
  streams: number;
  /** How long new connections from the address are refused from now (ms). */
  refusedForMs: number;
}

/**
 * Counts, on every session of `server`, the streams it opens and those the
 * client resets (closed with an error code) before the server wrote a message on them; a
 * session whose resets in one window pass `limits.maxResets` and half its
 * streams gets GOAWAY ENHANCE_YOUR_CALM and is destroyed `graceMs` later.
 */
export function guardSessions(
  server: http2.Http2Server | http2.Http2SecureServer,
  onClosed: (closed: ClosedSession) => void,
  limits: ResetLimits = DEFAULT_RESET_LIMITS,
  penalties: AddressPenalties = new AddressPenalties(limits),
): void {
  const goaway = (session: http2.ServerHttp2Session) => {
    try {
      session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, session.state.lastProcStreamID ?? 0);
    } catch {
      // Already closed: destroyed all the same.
    }
  };
  server.on('session', (session: http2.ServerHttp2Session) => {
    const address = (session.socket as { remoteAddress?: string } | undefined)?.remoteAddress ?? '?';
    if (penalties.refuses(address)) {
      // Told why, then closed before any of its streams is read.
      goaway(session);
      setImmediate(() => session.destroyed || session.destroy());
      return;
    }
    let windowStart = performance.now();
    let streams = 0;
    let resets = 0;
    let closing = false;
    const roll = () => {
      const now = performance.now();
      if (now - windowStart < limits.windowMs) return;
      windowStart = now;
      streams = resets = 0;
    };
    const calm = () => {
      closing = true;
      const socket = session.socket as { remotePort?: number } | undefined;
      const refusedForMs = penalties.strike(address);
      onClosed({ peer: `${address}:${socket?.remotePort ?? '?'}`, resets, streams, refusedForMs });
      goaway(session);
      setTimeout(() => {
        if (!session.destroyed) session.destroy();
      }, limits.graceMs).unref();
    };
    session.on('stream', (stream: http2.ServerHttp2Stream) => {
      if (closing) return;
      roll();
      streams++;
      // A client that cancels a stream it has been reading (a watch caught up, a follower stopped) resets it after
      // the server answered with messages: that is no rapid reset, which costs the server a stream it never gets to
      // answer. What grpc-js writes on a stream is its messages (headers and trailers go another way). nghttp2's own
      // budget (above) still counts every reset: past about 1,000 in a burst it ends even such a session (GOAWAY
      // INTERNAL_ERROR), which Node 20 gives no option to raise; the client reconnects as after any lost connection.
      let answered = false;
      const write = stream.write;
      stream.write = function writeAnswer(this: http2.ServerHttp2Stream, ...args: Parameters<typeof write>) {
        answered = true;
        stream.write = write;
        return write.apply(this, args);
      } as typeof write;
      // Not 'aborted': grpc-js often ends its side first (an answer without a token), and Node emits that only
      // while the server's side is open. grpc-js resets no stream itself, so a close with a code is the client's.
      stream.once('close', () => {
        if (closing || answered || stream.rstCode === http2.constants.NGHTTP2_NO_ERROR) return;
        roll();
        resets++;
        if (resets > limits.maxResets && resets * 2 > streams) calm();
      });
    });
  });
}
