/**
 * A TCP proxy in front of a real server (PostgreSQL, a serve instance), with
 * the faults a network has:
 *
 * - `pass`: bytes flow both ways.
 * - `blackhole`: connections stay open and no byte moves, as in a network
 *   stall: reading stops on both sides, so bytes wait in the kernel's
 *   buffers; a connection opened meanwhile is accepted but not connected
 *   upstream, and a close on either side is not passed on. Back in `pass`,
 *   everything that waited is delivered, late answers included, as TCP
 *   delivers after a partition heals.
 * - `reset`: every open connection is reset (RST, ECONNRESET on both
 *   sides), and so is each new one, at once.
 *
 * `retarget` sends new connections to another server (a load balancer
 * moving to another instance); `stop` cuts everything and stops listening.
 */
import { createServer, connect, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'blackhole' | 'reset';

export interface TcpProxy {
  port: number;
  readonly mode: ProxyMode;
  setMode(mode: ProxyMode): void;
  /** Where new connections go from now on. */
  retarget(target: { host: string; port: number }): void;
  /** Connections open through the proxy now. */
  connections(): number;
  /** Cuts every connection and stops listening. */
  stop(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket | undefined;
  /** A close that happened during a black hole, passed on when the network heals. */
  closedWhileStalled: Socket | undefined;
}

function reset(socket: Socket | undefined): void {
  if (!socket || socket.destroyed) return;
  // resetAndDestroy needs a connected socket; one still connecting is destroyed plainly.
  if (socket.readyState === 'open' || socket.readyState === 'readOnly' || socket.readyState === 'writeOnly') socket.resetAndDestroy();
  else socket.destroy();
}

export async function startTcpProxy(initial: { host: string; port: number }): Promise<TcpProxy> {
  let target = initial;
  let mode: ProxyMode = 'pass';
  const links = new Set<Link>();

  const forward = (from: Socket, to: () => Socket | undefined) => {
    from.on('data', (chunk) => {
      const destination = to();
      // Backpressure as TCP has it: a full destination stops reading here.
      if (destination && !destination.write(chunk)) {
        from.pause();
        destination.once('drain', () => mode === 'pass' && from.resume());
      }
    });
  };

  const closeLink = (link: Link, closed: Socket) => {
    if (mode === 'blackhole') {
      link.closedWhileStalled ??= closed;
      return;
    }
    link.client.destroy();
    link.upstream?.destroy();
    links.delete(link);
  };

  const connectUpstream = (link: Link) => {
    const upstream = connect(target.port, target.host);
    link.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('close', () => closeLink(link, upstream));
    forward(upstream, () => link.client);
    forward(link.client, () => link.upstream);
    if (mode !== 'pass') upstream.pause();
  };

  const server = createServer((client) => {
    client.on('error', () => undefined);
    if (mode === 'reset') {
      reset(client);
      return;
    }
    const link: Link = { client, upstream: undefined, closedWhileStalled: undefined };
    links.add(link);
    client.on('close', () => closeLink(link, client));
    if (mode === 'blackhole') {
      client.pause();
      return;
    }
    connectUpstream(link);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();

  return {
    port: typeof address === 'object' && address ? address.port : 0,
    get mode() {
      return mode;
    },
    setMode(next: ProxyMode) {
      mode = next;
      for (const link of [...links]) {
        if (next === 'reset') {
          reset(link.client);
          reset(link.upstream);
          links.delete(link);
        } else if (next === 'blackhole') {
          link.client.pause();
          link.upstream?.pause();
        } else {
          if (link.closedWhileStalled) {
            // What was in the buffers goes first, then the close.
            link.client.end();
            link.upstream?.end();
            links.delete(link);
            continue;
          }
          if (!link.upstream) connectUpstream(link);
          link.client.resume();
          link.upstream?.resume();
        }
      }
    },
    retarget(next) {
      target = next;
    },
    connections: () => links.size,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const link of links) {
          link.client.destroy();
          link.upstream?.destroy();
        }
        links.clear();
      }),
  };
}
