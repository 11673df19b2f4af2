/**
 * How a failed call of the user service (or another service of `serve`)
 * becomes the project's typed error, without loading grpc-js: the gRPC
 * client (client.ts) and the light unary path of one-shot commands
 * (unary-call.ts) map statuses the same way.
 */
import { AuthError, MiniappError, UpstreamError, type ErrorOptions } from '../../errors.js';
import { formatDuration } from '../../duration.js';

/** How the details of an UNAVAILABLE that serve sends for its database begin (grpc/status.ts): the server answered, its database did not. */
export const STORE_UNAVAILABLE_DETAILS = 'the database is unavailable, try again shortly';

/** The time limit of a call when --deadline does not say (the light path and grpc-js alike). */
export const DEFAULT_DEADLINE_MS = 10_000;

/** The gRPC status codes by number, as grpc-js names them. */
const STATUS_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

export const Status = { INTERNAL: 13, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, DEADLINE_EXCEEDED: 4, UNAVAILABLE: 14, UNAUTHENTICATED: 16 } as const;

/** What grpc-js hands a failed call: an Error with the status code and its details. */
export interface StatusError extends Error {
  code: number;
  details: string;
}

export const NOT_REACHED_HINT = 'is `miniapp serve` running? check --addr/grpc-addr';
const TOKEN_HINT = "`miniapp serve` writes its admin token to the profile's grpc-token; or pass --token";

/** A failed call of a service of serve other than authentication and reachability; `code` is the status name. */
class ServiceCallError extends MiniappError {
  override readonly code: string;
  constructor(status: string, message: string, options: ErrorOptions = {}) {
    super(message, options);
    this.code = status;
  }
}

function statusName(code: number): string {
  return STATUS_NAMES[code] ?? `STATUS_${code}`;
}

export interface ErrorContext {
  address: string;
  deadlineMs: number;
  tls: boolean;
  /** What the address serves, in messages (default: the user service). */
  service?: string;
}

export function isServiceError(error: unknown): error is StatusError {
  return error instanceof Error && typeof (error as Partial<StatusError>).code === 'number' && 'details' in error;
}

/** A gRPC status as the project's typed error; other errors pass through. */
export function serviceCallError(error: unknown, context: ErrorContext): unknown {
  if (!isServiceError(error)) return error;
  const name = statusName(error.code);
  const details = error.details || error.message;
  switch (error.code) {
    case Status.UNAUTHENTICATED:
      return new AuthError(`${name}: ${details}`, { code: name, hint: TOKEN_HINT, cause: error });
    case Status.UNAVAILABLE:
      if (context.tls && NOT_TLS.test(details)) return notTlsError(context, error);
      if (details.startsWith(STORE_UNAVAILABLE_DETAILS)) {
        return new UpstreamError(`${name}: ${context.service ?? 'the user service'} at ${context.address} answers, but ${details}`, {
          code: name,
          hint: 'serve recovers by itself once its database is back; its readiness (GET /health/ready) says when',
          cause: error,
        });
      }
      return new UpstreamError(`${name}: cannot reach ${context.service ?? 'the user service'} at ${context.address}: ${connectionProblem(details)}`, {
        code: name,
        hint: unreachableHint(context.tls),
        cause: error,
      });
    case Status.DEADLINE_EXCEEDED:
      return new UpstreamError(
        `${name}: no answer from ${context.service ?? 'the user service'} at ${context.address} within ${formatDuration(context.deadlineMs)}`,
        {
          code: name,
          hint: 'raise --deadline (e.g. --deadline 30s), or check the load of the server',
          cause: error,
        },
      );
    default:
      return new ServiceCallError(name, `${name}: ${details}`, { cause: error });
  }
}

/** What OpenSSL says when the other side answers a TLS hello in plain text (an HTTP/2 server without TLS). */
const NOT_TLS = /wrong version number|WRONG_VERSION_NUMBER|packet length too long|unknown protocol/i;

export function notTlsError(context: ErrorContext, cause?: unknown): UpstreamError {
  return new UpstreamError(
    `UNAVAILABLE: ${context.service ?? 'the user service'} at ${context.address} does not speak TLS; connect without --tls (and without --ca or the grpc-ca setting)`,
    { code: 'UNAVAILABLE', cause },
  );
}

/**
 * Whether a TLS handshake with `address` fails because the server answers
 * in plain text; undefined when it fails otherwise or cannot tell. A channel
 * that will not connect says only that it is in TRANSIENT_FAILURE, so one
 * bare handshake tells a plaintext server from an untrusted certificate.
 */
export async function answersInPlainText(address: string, timeoutMs: number): Promise<boolean | undefined> {
  const [{ connect }, { isIP }] = await Promise.all([import('node:tls'), import('node:net')]);
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(colon + 1));
  return new Promise((resolve) => {
    const socket = connect({
      host,
      port,
      // No server name for an IP (RFC 6066), and no trust needed to learn whether TLS is spoken at all.
      ...(isIP(host) ? {} : { servername: host }),
      ALPNProtocols: ['h2'],
      rejectUnauthorized: false,
    });
    const finish = (answer: boolean | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => finish(undefined), Math.min(timeoutMs, 5_000));
    socket.once('secureConnect', () => finish(false));
    socket.once('error', (error: Error & { code?: string }) => finish(NOT_TLS.test(`${error.code ?? ''} ${error.message}`) ? true : undefined));
  });
}

/**
 * grpc-js nests the reason: "round_robin: No connection established. Last
 * error: No connection established. Last error: Error: connect
 * ECONNREFUSED 127.0.0.1:1. Resolution note: "; keep the innermost.
 */
function connectionProblem(details: string): string {
  let text = details.replace(/^[a-z_]+: /, '').replace(/\.?\s*Resolution note:\s*$/, '');
  const at = text.lastIndexOf('Last error: ');
  if (at !== -1) text = text.slice(at + 'Last error: '.length).replace(/^Error: /, '');
  return text || details;
}

export function unreachableHint(tls: boolean): string {
  return tls
    ? `${NOT_REACHED_HINT}; does it serve TLS with a certificate your --ca (or grpc-ca) trusts?`
    : `${NOT_REACHED_HINT}; if it serves TLS, add --tls (and --ca)`;
}

/** The status name carried by a mapped error (`UNAVAILABLE`, ...), if any. */
export function statusOf(error: unknown): string | undefined {
  if (error instanceof ServiceCallError || error instanceof AuthError || error instanceof UpstreamError) return error.code;
  return undefined;
}
