/**
 * The fault proxy itself: what each mode does to bytes and connections, so
 * that the tests built on it fail for the right reason.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const servers: Server[] = [];
const proxies: TcpProxy[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const proxy of proxies.splice(0)) await proxy.stop();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

/** An echo server that prefixes what it echoes with its name. */
async function echo(name: string): Promise<{ host: string; port: number }> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => socket.write(`${name}:${chunk.toString()}`));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { host: '127.0.0.1', port: (server.address() as { port: number }).port };
}

async function client(proxy: TcpProxy): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect(proxy.port, '127.0.0.1');
  sockets.push(socket);
  let text = '';
  socket.on('data', (chunk) => (text += chunk.toString()));
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  return { socket, received: () => text };
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(condition()).toBe(true);
}

describe('tcp proxy', () => {
  it('passes bytes both ways', async () => {
    const proxy = await startTcpProxy(await echo('a'));
    proxies.push(proxy);
    const { socket, received } = await client(proxy);
    socket.write('hello');
    await until(() => received() === 'a:hello');
    expect(proxy.connections()).toBe(1);
  });

  it('holds every byte during a black hole and delivers them, in order, when it heals', async () => {
    const proxy = await startTcpProxy(await echo('a'));
    proxies.push(proxy);
    const { socket, received } = await client(proxy);
    socket.write('1');
    await until(() => received() === 'a:1');
    proxy.setMode('blackhole');
    socket.write('2');
    const late = await client(proxy);
    late.socket.write('x');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received()).toBe('a:1');
    expect(late.received()).toBe('');
    proxy.setMode('pass');
    await until(() => received() === 'a:1a:2' && late.received() === 'a:x');
  });

  it('passes on a close made during a black hole only when it heals', async () => {
    let closedUpstream = false;
    const server = createServer((socket) => socket.on('close', () => (closedUpstream = true)).on('error', () => undefined));
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: (server.address() as { port: number }).port });
    proxies.push(proxy);
    const { socket } = await client(proxy);
    await until(() => proxy.connections() === 1);
    proxy.setMode('blackhole');
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(closedUpstream).toBe(false);
    proxy.setMode('pass');
    await until(() => closedUpstream);
  });

  it('resets open and new connections in reset mode', async () => {
    const proxy = await startTcpProxy(await echo('a'));
    proxies.push(proxy);
    const { socket } = await client(proxy);
    const errors: string[] = [];
    socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? ''));
    proxy.setMode('reset');
    await until(() => socket.destroyed);
    expect(errors).toContain('ECONNRESET');
    const fresh = connect(proxy.port, '127.0.0.1');
    sockets.push(fresh);
    const [error] = (await once(fresh, 'error')) as [NodeJS.ErrnoException];
    expect(error.code).toBe('ECONNRESET');
    proxy.setMode('pass');
    const again = await client(proxy);
    again.socket.write('back');
    await until(() => again.received() === 'a:back');
  });

  it('sends new connections to another server after retarget', async () => {
    const proxy = await startTcpProxy(await echo('a'));
    proxies.push(proxy);
    const first = await client(proxy);
    proxy.retarget(await echo('b'));
    const second = await client(proxy);
    first.socket.write('1');
    second.socket.write('2');
    await until(() => first.received() === 'a:1' && second.received() === 'b:2');
  });
});
