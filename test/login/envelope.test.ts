import { describe, expect, it } from 'vitest';
import { partnerError, readFailure, unwrapEnvelope } from '../../src/login/envelope.js';
import { readTokenData, splitScopes } from '../../src/login/token-data.js';
import { AuthError, UpstreamError } from '../../src/errors.js';

describe('readFailure', () => {
  it('reads the three failure shapes seen in the wild', () => {
    expect(readFailure(400, { resultType: 'FAIL', error: { errorCode: 'invalid_grant', reason: 'expired' } })).toEqual({
      status: 400,
      errorCode: 'invalid_grant',
      reason: 'expired',
    });
    expect(readFailure(400, { error: 'invalid_grant' })).toEqual({ status: 400, errorCode: 'invalid_grant', reason: '' });
    expect(readFailure(200, { errorCode: 'USER_NOT_FOUND', reason: 'gone' })).toEqual({ status: 200, errorCode: 'USER_NOT_FOUND', reason: 'gone' });
  });

  it('treats an error status without a known body as a failure, and a success as none', () => {
    expect(readFailure(502, undefined)).toEqual({ status: 502, errorCode: 'HTTP_502', reason: '' });
    expect(readFailure(200, { resultType: 'SUCCESS', success: {} })).toBeUndefined();
  });
});

describe('partnerError', () => {
  const invalidGrant = { status: 400, errorCode: 'invalid_grant', reason: '' };
  it('tells an expired code, access token and refresh token apart by operation', () => {
    const code = partnerError('generate-token', invalidGrant);
    expect(code).toBeInstanceOf(AuthError);
    expect(code).toMatchObject({ code: 'INVALID_GRANT', exitCode: 4 });
    expect(code.hint).toContain('call appLogin() again');
    expect(partnerError('login-me', { ...invalidGrant, status: 401 })).toMatchObject({ code: 'ACCESS_TOKEN_EXPIRED', exitCode: 4 });
    const refresh = partnerError('refresh-token', invalidGrant);
    expect(refresh).toMatchObject({ code: 'REFRESH_TOKEN_EXPIRED', exitCode: 4 });
    expect(refresh.hint).toContain('log in again');
  });

  it('maps USER_NOT_FOUND to authentication and others to upstream failures with their code and reason', () => {
    expect(partnerError('login-me', { status: 404, errorCode: 'USER_NOT_FOUND', reason: '' })).toMatchObject({ code: 'USER_NOT_FOUND', exitCode: 4 });
    const internal = partnerError('login-me', { status: 500, errorCode: 'INTERNAL_ERROR', reason: 'db down' });
    expect(internal).toBeInstanceOf(UpstreamError);
    expect(internal.message).toContain('INTERNAL_ERROR: db down');
    expect(internal.hint).toContain('retry');
    const limit = partnerError('login-me', { status: 400, errorCode: 'BAD_REQUEST_RETRIEVE_CERT_RESULT_EXCEEDED_LIMIT', reason: '' });
    expect(limit.hint).toContain('does not return DI');
  });
});

describe('unwrapEnvelope', () => {
  it('returns the success payload, tolerates a bare 2xx object, and rejects non-objects', () => {
    expect(unwrapEnvelope('login-me', 200, { resultType: 'SUCCESS', success: { userKey: 1 } })).toEqual({ userKey: 1 });
    expect(unwrapEnvelope('remove-by-access-token', 200, { resultType: 'SUCCESS' })).toEqual({});
    expect(unwrapEnvelope('login-me', 200, { userKey: 1 })).toEqual({ userKey: 1 });
    expect(() => unwrapEnvelope('login-me', 200, 'text')).toThrow(UpstreamError);
  });
});

describe('readTokenData', () => {
  it('accepts tokenType in any case, expiresIn as a string, and scopes split by commas', () => {
    expect(readTokenData({ tokenType: 'bearer', accessToken: 'a', refreshToken: 'r', expiresIn: '3599', scope: 'user_ci,user_name, user_key' })).toEqual({
      tokenType: 'Bearer',
      accessToken: 'a',
      refreshToken: 'r',
      expiresIn: 3599,
      scope: 'user_ci user_name user_key',
    });
  });

  it("fills a missing lifetime with the spec's hour and rejects missing tokens or another token type", () => {
    expect(readTokenData({ accessToken: 'a', refreshToken: 'r' }).expiresIn).toBe(3600);
    expect(() => readTokenData({ accessToken: 'a' })).toThrow('without refreshToken');
    expect(() => readTokenData({ tokenType: 'MAC', accessToken: 'a', refreshToken: 'r' })).toThrow('only Bearer');
  });

  it('splits scopes on spaces and commas and keeps unknown names', () => {
    expect(splitScopes(' user_ci  user_name,user_phone,,future_scope ')).toEqual(['user_ci', 'user_name', 'user_phone', 'future_scope']);
    expect(splitScopes(undefined)).toEqual([]);
  });
});
