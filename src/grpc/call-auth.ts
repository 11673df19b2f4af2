/**
 * The token of a gRPC call: who it is (authenticate), and for a long
 * stream, who it still is (open): the stream holds a grant
 * (auth/stream-grants.ts) for as long as it lives, and ends UNAUTHENTICATED
 * when its token is revoked or expires or its user is deactivated or
 * deleted, or with the status of `require` when the principal no longer
 * passes it (an admin demoted while streaming).
 */
import * as grpc from '@grpc/grpc-js';
import type { Grant, StreamGrants } from '../auth/stream-grants.js';
import { MAX_BEARER_HEADER_LENGTH, TokenService, type Principal } from '../auth/tokens.js';
import { failStream, RpcError } from './status.js';

const { status: Status } = grpc;

/** How a stream whose token stopped authenticating ends. */
const TOKEN_GONE = {
  code: Status.UNAUTHENTICATED,
  details: 'the token of this stream no longer authenticates (revoked or expired, or its user was deactivated or deleted)',
} as const;

/** A long call's view of its principal, kept current. */
export interface OpenStream {
  /** Who the call is now (as last checked). */
  readonly principal: Principal;
  /** Checks the token now, before acting on a message; throws the status that ends the call when it no longer may. */
  recheck(): Promise<Principal>;
}

type StreamCall = {
  metadata: grpc.Metadata;
  readonly cancelled: boolean;
  emit(event: 'error', error: grpc.ServerErrorResponse): boolean;
  once(event: 'cancelled' | 'close' | 'error' | 'finish', listener: () => void): unknown;
};

export interface OpenOptions {
  /** Throws (an RpcError, PERMISSION_DENIED) when the principal may not hold this stream; checked again at each change. */
  require?: (principal: Principal) => void;
  /** Hears a changed principal that still passes `require`. */
  onChange?: (principal: Principal) => void;
  /** Ends the call with `status` (after the owner lets go of what it holds); the default emits it on the call. */
  end?: (status: { code: grpc.status; details: string }) => void;
}

export class CallAuth {
  constructor(
    private readonly tokens: TokenService,
    private readonly grants: StreamGrants,
  ) {}

  /** The bearer token of the call's `authorization` metadata; throws UNAUTHENTICATED naming what is wrong. */
  static token(metadata: grpc.Metadata): string {
    const values = metadata.get('authorization');
    if (values.length === 0) throw new RpcError(Status.UNAUTHENTICATED, 'missing authorization metadata: send "authorization: Bearer <token>"');
    const header = String(values[0]);
    if (header.length > MAX_BEARER_HEADER_LENGTH) {
      throw new RpcError(Status.UNAUTHENTICATED, `the authorization metadata is longer than any token (at most ${MAX_BEARER_HEADER_LENGTH} characters)`);
    }
    const token = TokenService.bearer(header);
    if (!token) throw new RpcError(Status.UNAUTHENTICATED, 'the authorization metadata must be "Bearer <token>"');
    return token;
  }

  /** The principal behind the call's `authorization` metadata; rejects with UNAUTHENTICATED. */
  authenticate(metadata: grpc.Metadata): Promise<Principal> {
    let token: string;
    try {
      token = CallAuth.token(metadata);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.tokens.authenticate(token).then(principalOrRefusal);
  }

  /**
   * Authenticates a long call and holds its grant until the call ends.
   * Rejects (before anything is held) with the status the call should end
   * with: UNAUTHENTICATED, or what `require` throws.
   */
  async open(call: StreamCall, options: OpenOptions = {}): Promise<OpenStream> {
    const token = CallAuth.token(call.metadata);
    const principal = principalOrRefusal(await this.tokens.authenticate(token));
    options.require?.(principal);
    const end = options.end ?? ((status) => failStream(call, status));
    let ended = false;
    const finish = (status: { code: grpc.status; details: string }) => {
      if (ended) return;
      ended = true;
      grant.release();
      end(status);
    };
    const grant: Grant = this.grants.hold(token, principal, (now) => {
      if (ended) return;
      if (!now) return finish(TOKEN_GONE);
      try {
        options.require?.(now);
      } catch (error) {
        return finish(error instanceof RpcError ? { code: error.code, details: error.message } : { code: Status.PERMISSION_DENIED, details: String(error) });
      }
      options.onChange?.(now);
    });
    const release = () => {
      ended = true;
      grant.release();
    };
    for (const event of ['cancelled', 'close', 'error', 'finish'] as const) call.once(event, release);
    if (call.cancelled) release();
    return {
      get principal() {
        return grant.principal;
      },
      recheck: async () => {
        const now = await grant.recheck();
        if (!now) {
          finish(TOKEN_GONE);
          throw new RpcError(TOKEN_GONE.code, TOKEN_GONE.details);
        }
        options.require?.(now);
        return now;
      },
    };
  }
}

function principalOrRefusal(principal: Principal | undefined): Principal {
  if (!principal) throw new RpcError(Status.UNAUTHENTICATED, 'invalid or expired token');
  return principal;
}
