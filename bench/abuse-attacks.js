/**
 * The attacks of issue 39 against one `miniapp serve`, for the abuse
 * benchmark (bench/abuse.bench.js): each runs until `stopped()` and counts
 * what it got. They are the suite's attacks made loops (the tests are
 * TypeScript and check one thing each; these run together, for minutes):
 *
 * - rapidReset: raw HTTP/2 sessions opening and resetting gRPC streams
 *   without a token (item 1; test/grpc/rapid-reset.test.ts);
 * - stalledWatchers: raw HTTP/2 WatchUserChanges streams with a small
 *   window that are never read, half resuming after 0, half live (item 2;
 *   test/users/watch-memory.test.ts);
 * - endlessUploads: multipart bodies sent a part a second, never the closing
 *   boundary (item 3; test/blog/upload-bodies.test.ts);
 * - nestedJson: posts 250,000 levels deep (item 5; test/http/json-body.test.ts);
 * - randomTokens: HTTP and gRPC requests, each with a made-up Bearer token
 *   (item 11; test/server/request-rates.test.ts);
 * - syncFlood: SyncUsers streams writing upserts as fast as serve takes
 *   them (item 11).
 */
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import { connect } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { Agent, request } from 'undici';

/**
 * The attackers' own address (another loopback address than the well-behaved client's 127.0.0.1, as an attacker is
 * another host): raw HTTP/2, raw sockets and undici connect from it. grpc-js cannot choose one, so its attackers
 * (made-up tokens, SyncUsers) share 127.0.0.1; the client's own token gives it a bucket of its own.
 */
export const ATTACKER_ADDRESS = process.env.BENCH_ABUSE_FROM ?? '127.0.0.2';

/** An HTTP/2 session to host:port from ATTACKER_ADDRESS. */
function h2From(address, options = {}) {
  const at = address.lastIndexOf(':');
  const [host, port] = [address.slice(0, at), Number(address.slice(at + 1))];
  return http2.connect(`http://${address}`, { ...options, createConnection: () => connect({ host, port, localAddress: ATTACKER_ADDRESS }) });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const madeUpToken = () => `mat_${randomBytes(32).toString('base64url')}`;

/** HEADERS + RST_STREAM in a loop on `sessions` sessions, reconnecting whenever serve closes one. */
export function rapidReset(address, stopped, { sessions = 4 } = {}) {
  const counts = { sessions: 0, resets: 0, goaways: {} };
  const one = async () => {
    while (!stopped()) {
      const session = h2From(address);
      counts.sessions++;
      session.on('error', () => undefined);
      session.on('goaway', (code) => (counts.goaways[code] = (counts.goaways[code] ?? 0) + 1));
      const connected = await new Promise((resolve) => {
        session.once('connect', () => resolve(true));
        session.once('close', () => resolve(false));
      });
      while (connected && !stopped() && !session.closed && !session.destroyed) {
        for (let i = 0; i < 50 && !session.closed && !session.destroyed; i++) {
          try {
            const stream = session.request({ ':method': 'POST', ':path': '/user.v1.UserService/GetUser', 'content-type': 'application/grpc', te: 'trailers' });
            stream.on('error', () => undefined);
            stream.close(http2.constants.NGHTTP2_CANCEL);
            counts.resets++;
          } catch {
            break;
          }
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      session.destroy();
      if (!connected) await sleep(50);
    }
  };
  return { counts, done: Promise.all(Array.from({ length: sessions }, one)) };
}

/**
 * `perToken` watch streams for each token, each on its own connection with a 1 KiB window, never read: held for
 * 5-10 s, then dropped and opened again (refused ones wait a second). Even slots resume after 0 (a catch-up of the
 * whole log), odd ones watch from now on.
 */
export function stalledWatchers(address, tokens, stopped, { perToken = 20 } = {}) {
  const counts = { opened: 0, refused: 0, statuses: {} };
  const slot = async (token, index) => {
    // WatchUserRequest { resume_after: 0 } (field 3, varint), or {}.
    const message = index % 2 === 0 ? Buffer.from([0x18, 0x00]) : Buffer.alloc(0);
    while (!stopped()) {
      const session = h2From(address, { settings: { initialWindowSize: 1024 } });
      session.on('error', () => undefined);
      const stream = session.request({
        ':method': 'POST',
        ':path': '/user.v1.UserService/WatchUserChanges',
        'content-type': 'application/grpc',
        te: 'trailers',
        authorization: `Bearer ${token}`,
      });
      stream.on('error', () => undefined);
      stream.end(Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]));
      stream.pause();
      counts.opened++;
      // A refusal (past the account's 16) comes as a trailers-only answer: its status in the headers.
      const refused = await Promise.race([
        new Promise((resolve) =>
          stream.once('response', (headers) => {
            const status = headers['grpc-status'];
            if (status !== undefined) counts.statuses[status] = (counts.statuses[status] ?? 0) + 1;
            resolve(status !== undefined && status !== '0');
          }),
        ),
        new Promise((resolve) => session.once('close', () => resolve(true))),
        sleep(5_000).then(() => false),
      ]);
      if (refused) counts.refused++;
      const hold = refused ? 1_000 : 5_000 + Math.random() * 5_000;
      for (let waited = 0; waited < hold && !stopped(); waited += 100) await sleep(100);
      session.destroy();
    }
  };
  const slots = tokens.flatMap((token) => Array.from({ length: perToken }, (_, i) => slot(token, i)));
  return { counts, done: Promise.all(slots) };
}

/**
 * `connections` uploads at once, each a multipart body announcing 100 MB that sends a part of 1 MB a second and
 * never the closing boundary; a connection serve answers or closes (503 past its uploads in flight, 408 past the
 * request time-out) is opened again a second later.
 */
export function endlessUploads(url, token, stopped, { connections = 40 } = {}) {
  const counts = { opened: 0, answers: {}, megabytes: 0 };
  const { hostname, port } = new URL(url);
  const boundary = 'never-closed-boundary';
  const head =
    `POST /api/v2/upload/images HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`;
  const part = Buffer.alloc(1024 * 1024, 0x61);
  const one = async () => {
    while (!stopped()) {
      const socket = connect({ port: Number(port), host: hostname, localAddress: ATTACKER_ADDRESS });
      counts.opened++;
      socket.on('error', () => undefined);
      let answered = false;
      let received = '';
      socket.on('data', (chunk) => {
        received += chunk.toString('latin1');
        if (!answered && received.includes('\r\n')) {
          answered = true;
          const status = received.split(' ')[1];
          counts.answers[status] = (counts.answers[status] ?? 0) + 1;
        }
      });
      let closed = false;
      socket.once('close', () => (closed = true));
      socket.write(head);
      for (let i = 0; !stopped() && !closed && !answered; i++) {
        const partHead = `${i > 0 ? '\r\n' : ''}--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${i}.png"\r\nContent-Type: image/png\r\n\r\n`;
        // Past 20 parts, a byte a second: still sending, never done.
        const bytes = i < 20 ? Buffer.concat([Buffer.from(partHead), part]) : Buffer.from('a');
        await new Promise((resolve) => socket.write(bytes, resolve));
        if (i < 20) counts.megabytes++;
        await sleep(1_000);
      }
      socket.destroy();
      if (!stopped()) await sleep(1_000);
    }
  };
  return { counts, done: Promise.all(Array.from({ length: connections }, one)) };
}

/** `loops` loops each posting `{"title":[[[...250,000 deep...]]]}` `perSecond` times a second (the 8 x 5). */
export function nestedJson(url, token, stopped, { loops = 8, perSecond = 5 } = {}) {
  const counts = { answers: {} };
  // Connections of its own, closed at the end: the descriptors serve holds after the attack are its own doing.
  const dispatcher = new Agent({ connect: { localAddress: ATTACKER_ADDRESS } });
  const levels = 250_000;
  const body = `{"title":${'['.repeat(levels)}${']'.repeat(levels)},"content":"x"}`;
  const one = async () => {
    while (!stopped()) {
      const started = Date.now();
      try {
        const answer = await request(`${url}/api/v2/blog/posts`, {
          dispatcher,
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body,
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        await answer.body.dump();
        counts.answers[answer.statusCode] = (counts.answers[answer.statusCode] ?? 0) + 1;
      } catch (error) {
        counts.answers[error.code ?? 'error'] = (counts.answers[error.code ?? 'error'] ?? 0) + 1;
      }
      await sleep(Math.max(0, 1_000 / perSecond - (Date.now() - started)));
    }
  };
  return { counts, done: Promise.all(Array.from({ length: loops }, one)).finally(() => dispatcher.close()) };
}

/** HTTP list requests and gRPC GetUser calls, each with a made-up token, as fast as serve answers them. */
export function randomTokens(url, grpcAddress, Client, stopped, { httpLoops = 8, grpcLoops = 4 } = {}) {
  const counts = { http: {}, grpc: {} };
  const dispatcher = new Agent({ connect: { localAddress: ATTACKER_ADDRESS } });
  const client = new Client(grpcAddress, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  const httpLoop = async () => {
    while (!stopped()) {
      try {
        const answer = await request(`${url}/api/v2/blog/posts?page_size=20`, {
          dispatcher,
          headers: { authorization: `Bearer ${madeUpToken()}` },
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        await answer.body.dump();
        counts.http[answer.statusCode] = (counts.http[answer.statusCode] ?? 0) + 1;
      } catch (error) {
        counts.http[error.code ?? 'error'] = (counts.http[error.code ?? 'error'] ?? 0) + 1;
      }
    }
  };
  const grpcLoop = async () => {
    while (!stopped()) {
      const metadata = new grpc.Metadata();
      metadata.set('authorization', `Bearer ${madeUpToken()}`);
      const code = await new Promise((resolve) =>
        client.GetUser({ user_id: '1' }, metadata, { deadline: Date.now() + 10_000 }, (error) => resolve(error ? grpc.status[error.code] : 'OK')),
      );
      counts.grpc[code] = (counts.grpc[code] ?? 0) + 1;
    }
  };
  const done = Promise.all([...Array.from({ length: httpLoops }, httpLoop), ...Array.from({ length: grpcLoops }, grpcLoop)]).finally(() => {
    client.close();
    return dispatcher.close();
  });
  return { counts, done };
}

/**
 * One SyncUsers stream per account, writing upserts of its own record (a new full name each) as fast as serve reads
 * them, with at most 64 unanswered (more would pile up in the attacker's own memory, not serve's).
 */
export function syncFlood(grpcAddress, Client, accounts, stopped) {
  const counts = { written: 0, answered: 0, answers: {}, ended: {} };
  const one = async ({ token, user }) => {
    const client = new Client(grpcAddress, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    try {
      while (!stopped()) {
        const metadata = new grpc.Metadata();
        metadata.set('authorization', `Bearer ${token}`);
        const call = client.SyncUsers(metadata);
        let ended = false;
        let written = 0;
        let answered = 0;
        let wake = () => undefined;
        const end = new Promise((resolve) => {
          call.on('data', (answer) => {
            counts.answers[answer.result ?? 'answer'] = (counts.answers[answer.result ?? 'answer'] ?? 0) + 1;
            counts.answered++;
            answered++;
            wake();
          });
          call.on('error', (error) => {
            counts.ended[grpc.status[error.code]] = (counts.ended[grpc.status[error.code]] ?? 0) + 1;
            resolve();
          });
          call.on('end', resolve);
        }).then(() => (ended = true));
        for (let i = 0; !stopped() && !ended; i++) {
          const upsert = { client_ref: `r${i}`, upsert: { user: { ...user, full_name: `Flood ${i}` }, password: '' } };
          counts.written++;
          written++;
          if (!call.write(upsert)) await Promise.race([new Promise((resolve) => call.once('drain', resolve)), end]);
          while (written - answered >= 64 && !ended && !stopped()) await Promise.race([new Promise((resolve) => (wake = resolve)), end, sleep(500)]);
        }
        call.cancel();
        await end;
      }
    } finally {
      client.close();
    }
  };
  return { counts, done: Promise.all(accounts.map(one)) };
}
