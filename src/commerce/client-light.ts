/**
 * The reads of the commerce services on the light path
 * (grpc/client/light-call.ts): one call without grpc-js, answered with the
 * message the grpc-js client (client.ts) gives, or undefined when that
 * client must make the call.
 */
import type { ConnectOptions } from '../grpc/client/channel.js';
import { lightCall } from '../grpc/client/light-call.js';

/** What the address serves, in the errors of both clients. */
export const COMMERCE_SERVICE = 'the commerce services of `miniapp serve`';

/** A unary read of inventory.v1, order.v1 or payment.v1 (`path`: /package.Service/Method). */
export async function lightCommerceRead<T>(connection: ConnectOptions, path: string, request: object): Promise<T | undefined> {
  return (await lightCall<T>(connection, path, request, COMMERCE_SERVICE))?.messages[0];
}
