/**
 * grpc-js clients of `miniapp serve`'s commerce services for tests: one
 * connection per service client, the admin token by default, closed by `close`.
 */
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../../src/grpc/protos.js';
import type { RunningServe } from '../../src/server/serve.js';
import { newUser, unary, UserClients, login, type AnyClient } from './user-client.js';

export type CommerceService = 'inventory' | 'payment' | 'order';
const NAMES = { inventory: 'inventory.v1.InventoryService', payment: 'payment.v1.PaymentService', order: 'order.v1.OrderService' } as const;

export class CommerceClients {
  readonly #clients: grpc.Client[] = [];
  readonly #byService = new Map<CommerceService, AnyClient>();

  constructor(readonly running: RunningServe) {}

  get address(): string {
    return this.running.grpc!.address;
  }

  client(service: CommerceService): AnyClient {
    let client = this.#byService.get(service);
    if (!client) {
      const { Client } = serviceDefinition(NAMES[service]);
      client = new Client(this.address, grpc.credentials.createInsecure()) as AnyClient;
      this.#clients.push(client);
      this.#byService.set(service, client);
    }
    return client;
  }

  /** One unary call with `token` (the admin token by default). */
  call(service: CommerceService, method: string, request: unknown, token = this.running.adminToken): Promise<any> {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return unary(this.client(service), method, request, metadata);
  }

  /** A new user of serve and their token. */
  async user(n: number | string): Promise<{ id: number; token: string }> {
    const users = new UserClients(this.running).client();
    try {
      const created = await unary(users, 'CreateUser', newUser(n));
      return { id: Number(created.user.id), token: await login(this.running, `user${n}`) };
    } finally {
      users.close();
    }
  }

  close(): void {
    for (const client of this.#clients) client.close();
  }
}

/** The status name and details of a failed call (throws when it succeeded). */
export async function refused(promise: Promise<unknown>): Promise<{ code: string; details: string }> {
  try {
    await promise;
  } catch (error) {
    const e = error as grpc.ServiceError;
    return { code: grpc.status[e.code] ?? String(e.code), details: e.details };
  }
  throw new Error('the call succeeded; a refusal was expected');
}
