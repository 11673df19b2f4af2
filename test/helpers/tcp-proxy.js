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
import { createServer, connect } from 'node:net';

/** @param {import('node:net').Socket | undefined} socket */
function reset(socket) {
  if (!socket || socket.destroyed) return;
  // resetAndDestroy needs a connected socket; one still connecting is destroyed plainly.
  if (socket.readyState === 'open' || socket.readyState === 'readOnly' || socket.readyState === 'writeOnly') socket.resetAndDestroy();
  else socket.destroy();
}

/** @param {{ host: string; port: number }} initial @returns {Promise<import('./tcp-proxy.js').TcpProxy>} */
export async function startTcpProxy(initial) {
  let target = initial;
  /** @type {'pass' | 'blackhole' | 'reset'} */
  let mode = 'pass';
  const links = new Set();

  const forward = (from, to) => {
    from.on('data', (chunk) => {
      const destination = to();
      // Backpressure as TCP has it: a full destination stops reading here.
      if (destination && !destination.write(chunk)) {
        from.pause();
        destination.once('drain', () => mode === 'pass' && from.resume());
      }
    });
  };

  const closeLink = (link, closed) => {
    if (mode === 'blackhole') {
      link.closedWhileStalled ??= closed;
      return;
    }
    link.client.destroy();
    link.upstream?.destroy();
    links.delete(link);
  };

  const connectUpstream = (link) => {
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
    const link = { client, upstream: undefined, closedWhileStalled: undefined };
    links.add(link);
    client.on('close', () => closeLink(link, client));
    if (mode === 'blackhole') {
      client.pause();
      return;
    }
    connectUpstream(link);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();

  return {
    port: typeof address === 'object' && address ? address.port : 0,
    get mode() {
      return mode;
    },
    setMode(next) {
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
      new Promise((resolve) => {
        server.close(() => resolve());
        for (const link of links) {
          link.client.destroy();
          link.upstream?.destroy();
        }
        links.clear();
      }),
  };
}
