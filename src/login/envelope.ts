/**
 * Reading partner-API answers. The spec's envelope is `{ resultType,
 * success | error: { errorCode, reason } }`; the wild also sends a bare
 * `{ "error": "invalid_grant" }` and a top-level `errorCode`. Every failure
 * becomes a typed error that says what happened and what to do next, with
 * a machine-readable `code` that the relay forwards.
 */
import { isJsonObject } from '../json-syntax.js';
import { AuthError, UpstreamError, type MiniappError } from '../errors.js';

export type PartnerOperation = 'generate-token' | 'refresh-token' | 'login-me' | 'remove-by-access-token' | 'remove-by-user-key' | 'probe';

export interface PartnerFailureInfo {
  status: number;
  errorCode: string;
  reason: string;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value);
}

/** The failure carried by an answer, in whichever of the three shapes it came; undefined for a success. */
export function readFailure(status: number, body: unknown): PartnerFailureInfo | undefined {
  if (isJsonObject(body)) {
    if (body.resultType === 'FAIL') {
      const error = isJsonObject(body.error) ? body.error : {};
      return { status, errorCode: text(error.errorCode) || 'UNKNOWN', reason: text(error.reason ?? error.message) };
    }
    if (typeof body.error === 'string') {
      return { status, errorCode: body.error, reason: text(body.error_description ?? body.reason ?? body.message) };
    }
    if (typeof body.errorCode === 'string') {
      return { status, errorCode: body.errorCode, reason: text(body.reason ?? body.message) };
    }
  }
  if (status >= 400) return { status, errorCode: `HTTP_${status}`, reason: '' };
  return undefined;
}

/** The success payload of an answer, or the typed error of its failure. */
export function unwrapEnvelope(operation: PartnerOperation, status: number, body: unknown): unknown {
  const failure = readFailure(status, body);
  if (failure) throw partnerError(operation, failure);
  if (isJsonObject(body) && body.resultType === 'SUCCESS') return body.success ?? {};
  if (isJsonObject(body)) return body; // tolerated: a 2xx answer without the envelope
  throw new UpstreamError(`the partner API answered ${operation} with HTTP ${status} and a body that is not a JSON object`, {
    code: 'BAD_RESPONSE',
  });
}

const LOG_IN_AGAIN = 'log in again: call appLogin() in the mini-app, then `miniapp token exchange --code CODE`';

export function partnerError(operation: PartnerOperation, failure: PartnerFailureInfo): MiniappError {
  const { errorCode, reason, status } = failure;
  const detail = reason ? ` (${errorCode}: ${reason})` : ` (${errorCode})`;
  if (errorCode.toLowerCase() === 'invalid_grant') {
    if (operation === 'generate-token') {
      return new AuthError(`the authorization code has expired or was already used${detail}`, {
        code: 'INVALID_GRANT',
        hint: 'call appLogin() again for a new code: a code lives 10 minutes and works once',
      });
    }
    if (operation === 'refresh-token') {
      return new AuthError(`the refresh token has expired or was revoked${detail}`, { code: 'REFRESH_TOKEN_EXPIRED', hint: LOG_IN_AGAIN });
    }
    return new AuthError(`the access token has expired or was revoked${detail}`, {
      code: 'ACCESS_TOKEN_EXPIRED',
      hint: 'run `miniapp token refresh`, or log in again',
    });
  }
  if (errorCode === 'USER_NOT_FOUND') {
    return new AuthError(`the partner API knows no such user${detail}`, { code: 'USER_NOT_FOUND', hint: LOG_IN_AGAIN });
  }
  if (status === 401 || status === 403) {
    return new AuthError(`the partner API rejected the credentials of ${operation}: HTTP ${status}${detail}`, {
      code: 'ACCESS_TOKEN_REJECTED',
      hint: 'run `miniapp token refresh`, or log in again',
    });
  }
  if (errorCode === 'BAD_REQUEST_RETRIEVE_CERT_RESULT_EXCEEDED_LIMIT') {
    return new UpstreamError(`the identity-result retrieval limit is exceeded${detail}`, {
      code: errorCode,
      hint: 'use the API variant that does not return DI',
    });
  }
  return new UpstreamError(`the partner API failed ${operation} with HTTP ${status}${detail}`, {
    code: errorCode === 'INTERNAL_ERROR' ? 'UPSTREAM_INTERNAL_ERROR' : errorCode,
    hint: errorCode === 'INTERNAL_ERROR' || status >= 500 ? 'the service had an internal error; retry in a moment' : undefined,
  });
}
