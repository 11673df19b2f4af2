/**
 * Bearer tokens (src/auth/tokens.ts): only the SHA-256 of a token is
 * stored, as lower-case hex, so the rows of existing databases keep
 * matching whatever computes the digest.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/store.js';
import { newToken, TokenService } from '../../src/auth/tokens.js';

describe('TokenService', () => {
  let store: Store;
  const now = new Date('2026-03-01T12:00:00.000Z');

  beforeEach(async () => {
    store = await openStore({ kind: 'memory' });
  });
  afterEach(async () => {
    await store.close();
  });

  it('stores the SHA-256 hex of a token, and finds a token by the row such a digest keys', async () => {
    const tokens = new TokenService(store.sql, () => now);
    const admin = await tokens.ensureAdminToken(undefined);
    const rows = await store.sql.all<{ token_hash: string; kind: string }>('SELECT token_hash, kind FROM api_tokens');
    expect(rows).toEqual([{ token_hash: createHash('sha256').update(admin).digest('hex'), kind: 'admin' }]);

    // A row written as earlier versions wrote it.
    const older = newToken();
    await store.sql.run('INSERT INTO api_tokens (token_hash, kind, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
      createHash('sha256').update(older).digest('hex'),
      'admin',
      null,
      now.toISOString(),
      null,
    ]);
    expect(await tokens.authenticate(older)).toMatchObject({ kind: 'admin', isAdmin: true });
    expect(await tokens.authenticate(newToken())).toBeUndefined();
    expect(await tokens.authenticate(undefined)).toBeUndefined();
  });
});
