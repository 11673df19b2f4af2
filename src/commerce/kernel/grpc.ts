/**
 * The gRPC side the three commerce services share: a unary handler that
 * authenticates the call, runs the domain function once and answers with
 * its result or the status of its error; the error-to-status map; and the
 * conversions every message needs (timestamps, optional strings).
 */
import * as grpc from '@grpc/grpc-js';
import type { Principal } from '../../auth/tokens.js';
import { toTimestamp, type Timestamp } from '../../grpc/protos.js';
import { RpcError, unavailableStatus } from '../../grpc/status.js';
import { CommerceError } from './common.js';
import { wasReplayed } from './idempotency.js';

/** Response metadata of an answer to an idempotency key seen before (Stripe's `Idempotent-Replayed` header). */
const REPLAYED_METADATA = 'idempotent-replayed';

export type Authenticate = (metadata: grpc.Metadata) => Promise<Principal>;
export type InternalLog = (message: string, fields?: Record<string, unknown>) => void;

/** Any error as a gRPC status: the domain's refusals by name, the store's outages as UNAVAILABLE, the rest INTERNAL without details. */
function commerceStatus(error: unknown): { code: grpc.status; details: string } {
  if (error instanceof RpcError) return { code: error.code, details: error.message };
  if (error instanceof CommerceError) return { code: grpc.status[error.code], details: error.message };
  return unavailableStatus(error) ?? { code: grpc.status.INTERNAL, details: 'internal error' };
}

/** Makes unary handlers that authenticate, run, and answer exactly once. */
export function unaryFactory(authenticate: Authenticate, log: InternalLog | undefined) {
  return <Req, Res>(run: (request: Req, principal: Principal) => Promise<Res>) =>
    (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
      authenticate(call.metadata)
        .then((principal) => run(call.request, principal))
        .then(
          (response) => {
            if (wasReplayed(response)) {
              const metadata = new grpc.Metadata();
              metadata.set(REPLAYED_METADATA, 'true');
              call.sendMetadata(metadata);
            }
            callback(null, response);
          },
          (error: unknown) => {
            const status = commerceStatus(error);
            if (status.code === grpc.status.INTERNAL)
              log?.('commerce service internal error', { error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
            callback(status);
          },
        );
    };
}

/** The admin role, or PERMISSION_DENIED naming what needs it. */
export function requireAdmin(principal: Principal, what: string): void {
  if (!principal.isAdmin) throw new CommerceError('PERMISSION_DENIED', `${what} needs the admin token`);
}

/** An ISO time as a Timestamp, null for none. */
export function timestampOf(iso: string | null | undefined): Timestamp | null {
  return iso ? toTimestamp(new Date(iso)) : null;
}
