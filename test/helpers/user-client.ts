/** grpc-js clients of `miniapp serve`'s user service for tests: one connection each, closed by `closeAll`. */
import { afterEach, beforeEach } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { userServiceDefinition } from '../../src/users/proto.js';
import { startTestServe } from './serve.js';
import type { RunningServe } from '../../src/server/serve.js';
import type { StoreLocation } from '../../src/store/store.js';
import { useBackendStore } from './backend-store.js';
import type { Backend } from './postgres.js';

export type AnyClient = grpc.Client & Record<string, any>;

export class UserClients {
  readonly #clients: grpc.Client[] = [];

  constructor(readonly running: RunningServe) {}

  /** serve in-process with the gRPC port on 127.0.0.1:0 and an in-memory store, or the one given. */
  static async start(store?: StoreLocation): Promise<UserClients> {
    return new UserClients(await startTestServe({ grpc: { host: '127.0.0.1', port: 0 }, shutdownDeadlineMs: 500, ...(store ? { store } : {}) }));
  }

  get address(): string {
    return this.running.grpc!.address;
  }

  /** A client on its own connection, so that one stalled stream cannot hold up another's. */
  client(): AnyClient {
    const { Client } = userServiceDefinition();
    const c = new Client(this.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }) as AnyClient;
    this.#clients.push(c);
    return c;
  }

  /** A raw client for hand-made requests (makeUnaryRequest with custom serializers). */
  raw(): grpc.Client {
    const c = new grpc.Client(this.address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    this.#clients.push(c);
    return c;
  }

  auth(token = this.running.adminToken): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return metadata;
  }

  async close(): Promise<void> {
    for (const c of this.#clients) c.close();
    await this.running.close();
  }
}

export function unary(c: AnyClient, method: string, request: unknown, metadata = new grpc.Metadata()): Promise<any> {
  return new Promise((resolve, reject) =>
    c[method](request, metadata, (error: grpc.ServiceError | null, response: unknown) => (error ? reject(error) : resolve(response))),
  );
}

/** The call's error (code and details), or undefined when it succeeded. */
export async function failure(promise: Promise<unknown>): Promise<{ code: string; details: string } | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    const e = error as grpc.ServiceError;
    return { code: grpc.status[e.code] ?? String(e.code), details: e.details };
  }
}

export function collect(call: grpc.ClientReadableStream<any>): Promise<any[]> {
  return new Promise((resolve, reject) => {
    const items: any[] = [];
    call.on('data', (item) => items.push(item));
    call.on('end', () => resolve(items));
    call.on('error', reject);
  });
}

export const newUser = (n: number | string, extra: Record<string, unknown> = {}) => ({
  username: `user${n}`,
  email: `user${n}@example.com`,
  password: 'correct horse',
  full_name: `User ${n}`,
  ...extra,
});

/** A user token, as the blog's login (POST /api/v1/auth/login) issues it; the password is newUser's. */
export async function login(running: RunningServe, username: string, password = 'correct horse'): Promise<string> {
  const response = await fetch(`${running.url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  const body = (await response.json()) as { access_token?: string };
  if (!response.ok || !body.access_token) throw new Error(`login of ${username} failed: ${response.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

/** serve on `backend`'s store for each test of the describe block it is called in (UserClients.start), closed after it. */
export function useUserClients(backend: Backend): { readonly serve: UserClients } {
  const store = useBackendStore(backend);
  let serve: UserClients | undefined;
  beforeEach(async () => {
    serve = await UserClients.start(store.location());
  });
  afterEach(async () => {
    await serve?.close();
    serve = undefined;
  });
  return {
    get serve() {
      if (!serve) throw new Error('useUserClients: used outside a test');
      return serve;
    },
  };
}
