/**
 * The well-behaved client of the abuse benchmark, on a worker thread of its
 * own (so that the attackers on the main thread do not delay its clock): in
 * a loop, one gRPC GetUser of its own record, one HTTP GET /health and one
 * GET /api/v2/blog/posts?page_size=20 with its token, then 20 ms of rest.
 * Each answer's latency goes to the parent in batches: [at, kind, ms, ok].
 * It stops when the parent posts 'stop'.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { Agent, request } from 'undici';

const { root, url, grpcAddress, token, userId } = workerData;
const { userServiceDefinition } = await import(pathToFileURL(join(root, 'dist', 'users', 'proto.js')).href);
const { Client } = userServiceDefinition();
const client = new Client(grpcAddress, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
const dispatcher = new Agent({ connections: 2 });
const metadata = new grpc.Metadata();
metadata.set('authorization', `Bearer ${token}`);

let stopped = false;
parentPort.on('message', (message) => {
  if (message === 'stop') stopped = true;
});

let batch = [];
const flush = () => {
  if (batch.length > 0) parentPort.postMessage(batch);
  batch = [];
};
const flusher = setInterval(flush, 250);

async function timed(kind, call) {
  const started = performance.now();
  let ok = false;
  try {
    ok = await call();
  } catch {
    ok = false;
  }
  batch.push([Date.now(), kind, performance.now() - started, ok]);
}

const getUser = () => new Promise((resolve) => client.GetUser({ user_id: userId }, metadata, { deadline: Date.now() + 10_000 }, (error) => resolve(!error)));

async function get(path, auth) {
  const answer = await request(`${url}${path}`, {
    dispatcher,
    headers: auth ? { authorization: `Bearer ${token}` } : {},
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  await answer.body.dump();
  return answer.statusCode === 200;
}

while (!stopped) {
  await timed('GetUser', getUser);
  await timed('health', () => get('/health', false));
  await timed('posts', () => get('/api/v2/blog/posts?page_size=20', true));
  await new Promise((resolve) => setTimeout(resolve, 20));
}
clearInterval(flusher);
flush();
client.close();
await dispatcher.close();
parentPort.postMessage('done');
