/**
 * Bearer tokens for the user service and the blog API, one module for
 * both. A token is 32 random bytes (`mat_` + base64url); only its SHA-256
 * is stored, so a copy of the database does not hand out access. The
 * admin token of `serve` is also kept in a 0600 file of the data dir so it
 * survives restarts and can be shown again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from '../store/database.js';
import type { UserStore } from '../users/user-store.js';

export const ADMIN_TOKEN_FILE = 'admin-token';

/**
 * Our tokens are `mat_` and 43 characters, so "Bearer <token>" is 54; a
 * longer header cannot hold one of ours and is refused before any parsing
 * or lookup. The slack leaves room for a longer token format later.
 */
export const MAX_BEARER_HEADER_LENGTH = 256;

export interface Principal {
  kind: 'admin' | 'user';
  /** The user behind a user token; null for the admin token. */
  userId: number | null;
  username: string | null;
  roles: string[];
  isAdmin: boolean;
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export function newToken(): string {
  return `mat_${randomBytes(32).toString('base64url')}`;
}

export class TokenService {
  readonly #insert;
  readonly #lookup;

  constructor(
    db: Db,
    private readonly users: UserStore,
    private readonly now: () => Date = () => new Date(),
  ) {
    // Prepared once: authenticate runs on every protected call.
    this.#insert = db.prepare('INSERT OR IGNORE INTO api_tokens (token_hash, kind, user_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)');
    this.#lookup = db.prepare('SELECT kind, user_id, expires_at FROM api_tokens WHERE token_hash = ?');
  }

  /**
   * The admin token: read from the data dir, or created and written there
   * (mode 0600) on first start; in memory only for an in-memory store.
   */
  ensureAdminToken(dataDir: string | undefined): string {
    const file = dataDir ? join(dataDir, ADMIN_TOKEN_FILE) : undefined;
    let token = file && existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
    if (!token) {
      token = newToken();
      if (file) {
        writeFileSync(file, `${token}\n`, { mode: 0o600 });
        chmodSync(file, 0o600);
      }
    }
    this.#insert.run(digest(token), 'admin', null, this.now().toISOString(), null);
    return token;
  }

  /** A token for a user (the blog's login), valid for `ttlSeconds`. */
  issueUserToken(userId: number, ttlSeconds: number): { token: string; expiresIn: number } {
    const token = newToken();
    const now = this.now();
    this.#insert.run(digest(token), 'user', userId, now.toISOString(), new Date(now.getTime() + ttlSeconds * 1000).toISOString());
    return { token, expiresIn: ttlSeconds };
  }

  /** Who holds `token`, or undefined when it is unknown, expired, or its user is gone or inactive. */
  authenticate(token: string | undefined): Principal | undefined {
    if (!token) return undefined;
    const row = this.#lookup.get(digest(token)) as
      | { kind: 'admin' | 'user'; user_id: number | null; expires_at: string | null }
      | undefined;
    if (!row) return undefined;
    if (row.expires_at && Date.parse(row.expires_at) <= this.now().getTime()) return undefined;
    if (row.kind === 'admin') return { kind: 'admin', userId: null, username: null, roles: ['admin'], isAdmin: true };
    const user = row.user_id === null ? undefined : this.users.get(row.user_id);
    if (!user || !user.isActive) return undefined;
    return { kind: 'user', userId: user.id, username: user.username, roles: user.roles, isAdmin: user.roles.includes('admin') };
  }

  /** Reads `Bearer <token>` (case-insensitive scheme) from a header value; nothing from one too long to hold a token. */
  static bearer(header: string | undefined): string | undefined {
    if (!header || header.length > MAX_BEARER_HEADER_LENGTH) return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match?.[1];
  }
}
