/**
 * Bearer tokens for the user service and the blog API, one module for
 * both. A token is 32 random bytes (`mat_` + base64url); only its SHA-256
 * is stored, so a copy of the database does not hand out access.
 *
 * The admin token of `serve` survives restarts and can be shown again: on
 * SQLite it is kept in a 0600 file of the data dir; on PostgreSQL, where
 * every instance must hold the same one, in `server_secrets`, written by
 * whichever instance starts first (the others find it there); in memory
 * for an in-memory store.
 */
import { hash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, chmodSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { join } from 'node:path';
import type { Signals } from '../store/signals.js';
import type { Sql } from '../store/sql.js';
import { BatchedRead, inList } from '../store/batched-read.js';

export const ADMIN_TOKEN_FILE = 'admin-token';
const ADMIN_TOKEN_SECRET = 'admin_token';

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
  /** When the token stops being valid (ms since the epoch); undefined when it does not expire. */
  expiresAt?: number | undefined;
}

/**
 * Published (payload: the token's SHA-256, hex) when a token is revoked, so
 * that the long streams it opened on any instance end (stream-grants.ts).
 */
export const TOKEN_REVOKED_CHANNEL = 'token_revoked';

/** What the store keeps of a token, and what a revocation names: its SHA-256, hex. */
export function tokenHash(token: string): string {
  return digest(token);
}

function digest(token: string): string {
  // One call, no Hash object: every protected call hashes its token.
  return hash('sha256', token, 'hex');
}

export function newToken(): string {
  return `mat_${randomBytes(32).toString('base64url')}`;
}

const INSERT = 'INSERT INTO api_tokens (token_hash, kind, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING';
// The token and its user in one query: one round trip per protected call on SQLite; on PostgreSQL the tokens of
// the calls that arrive together share one (lookupMany, see BatchedRead).
const COLUMNS = 't.kind, t.expires_at, u.id, u.username, u.is_active, u.roles FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id';
const LOOKUP = `SELECT ${COLUMNS} WHERE t.token_hash = $1`;
const lookupMany = (condition: string) => `SELECT t.token_hash, ${COLUMNS} WHERE ${condition}`;
const SHARE_SECRET = 'INSERT INTO server_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING';
const READ_SECRET = 'SELECT value FROM server_secrets WHERE name = $1';

interface LookupRow {
  kind: 'admin' | 'user';
  expires_at: string | null;
  id: number | null;
  username: string | null;
  /** 0 or 1 from SQLite, a boolean from PostgreSQL; null when the token has no user. */
  is_active: number | boolean | null;
  roles: string | null;
}

export class TokenService {
  readonly #batch: BatchedRead<string, LookupRow> | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date = () => new Date(),
    private readonly signals?: Signals,
    /**
     * Told of each token issued, and what each authentication found, by the token's hash (tokenHash), which it
     * has already made (the request rates give a known token a bucket of its own).
     */
    private readonly onVerdict?: (hashed: string, authenticated: boolean) => void,
  ) {
    if (sql.dialect === 'postgres') {
      this.#batch = new BatchedRead<string, LookupRow>(async (hashes) => {
        const { condition, params } = inList('t.token_hash', hashes);
        const rows = await sql.all<LookupRow & { token_hash: string }>(lookupMany(condition), params);
        return new Map(rows.map((row) => [row.token_hash, row]));
      });
    }
  }

  /**
   * The admin token (see the module's comment for where it lives), created
   * on first start and registered as a token. A token file that others
   * may read is tightened to 0600 first; `onTightened` hears of it.
   */
  async ensureAdminToken(dataDir: string | undefined, onTightened?: (file: string, mode: number) => void): Promise<string> {
    const token = this.sql.dialect === 'postgres' ? await this.#sharedAdminToken() : adminTokenFile(dataDir, onTightened);
    const hashed = digest(token);
    await this.sql.run(INSERT, [hashed, 'admin', null, this.now().toISOString(), null]);
    this.onVerdict?.(hashed, true);
    return token;
  }

  /** The first instance's token wins the insert; every instance then reads the one that won. */
  async #sharedAdminToken(): Promise<string> {
    await this.sql.run(SHARE_SECRET, [ADMIN_TOKEN_SECRET, newToken(), this.now().toISOString()]);
    const row = await this.sql.one<{ value: string }>(READ_SECRET, [ADMIN_TOKEN_SECRET]);
    if (!row) throw new Error('the shared admin token vanished between writing and reading it');
    return row.value;
  }

  /** A token for a user (the blog's login), valid for `ttlSeconds`. */
  async issueUserToken(userId: number, ttlSeconds: number): Promise<{ token: string; expiresIn: number }> {
    const token = newToken();
    const now = this.now();
    const hashed = digest(token);
    await this.sql.run(INSERT, [hashed, 'user', userId, now.toISOString(), new Date(now.getTime() + ttlSeconds * 1000).toISOString()]);
    // Known from the start: its first request already counts by itself, not against an address others may share.
    this.onVerdict?.(hashed, true);
    return { token, expiresIn: ttlSeconds };
  }

  /**
   * Ends a user token before it expires (a log-out): gone from the store, and
   * the streams it holds open on every instance are told. False when it was
   * not a user token this store knows (the admin token cannot be revoked so).
   */
  async revoke(token: string): Promise<boolean> {
    const hashed = digest(token);
    const row = await this.sql.one<{ n: number }>("SELECT count(*) AS n FROM api_tokens WHERE token_hash = $1 AND kind = 'user'", [hashed]);
    if (!row || Number(row.n) === 0) return false;
    await this.sql.run("DELETE FROM api_tokens WHERE token_hash = $1 AND kind = 'user'", [hashed]);
    await this.signals?.publish(TOKEN_REVOKED_CHANNEL, hashed);
    return true;
  }

  /** Who holds `token`, or undefined when it is unknown, expired, or its user is gone or inactive. */
  authenticate(token: string | undefined): Promise<Principal | undefined> {
    if (!token) return Promise.resolve(undefined);
    const hashed = digest(token);
    const row = this.#batch ? this.#batch.get(hashed) : this.sql.one<LookupRow>(LOOKUP, [hashed]);
    return row.then((found) => {
      const principal = this.#principal(found);
      this.onVerdict?.(hashed, principal !== undefined);
      return principal;
    });
  }

  #principal(row: LookupRow | undefined): Principal | undefined {
    if (!row) return undefined;
    const expiresAt = row.expires_at ? Date.parse(row.expires_at) : undefined;
    if (expiresAt !== undefined && expiresAt <= this.now().getTime()) return undefined;
    if (row.kind === 'admin') return { kind: 'admin', userId: null, username: null, roles: ['admin'], isAdmin: true };
    if (row.id === null || !(row.is_active === true || row.is_active === 1)) return undefined;
    const roles = JSON.parse(row.roles ?? '[]') as string[];
    return { kind: 'user', userId: Number(row.id), username: row.username, roles, isAdmin: roles.includes('admin'), expiresAt };
  }

  /** Reads `Bearer <token>` (case-insensitive scheme) from a header value; nothing from one too long to hold a token. */
  static bearer(header: string | undefined): string | undefined {
    if (!header || header.length > MAX_BEARER_HEADER_LENGTH) return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match?.[1];
  }
}

/**
 * The admin token of a SQLite store: from its file in the data dir, or new
 * (and written there, 0600). A file found open to the group or others
 * (restored from a backup, copied by hand) is made 0600 before it is read.
 */
function adminTokenFile(dataDir: string | undefined, onTightened?: (file: string, mode: number) => void): string {
  const file = dataDir ? join(dataDir, ADMIN_TOKEN_FILE) : undefined;
  if (file && existsSync(file)) {
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      try {
        chmodSync(file, 0o600);
      } catch (error) {
        throw new ConfigError(`the admin token file ${file} is readable by others (mode ${mode.toString(8).padStart(4, '0')}) and cannot be made 0600`, {
          hint: `make it 0600 yourself (chmod 600 ${file}), or remove it for a new token`,
          cause: error,
        });
      }
      onTightened?.(file, mode);
    }
  }
  let token = file && existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  if (!token) {
    token = newToken();
    if (file) {
      writeFileSync(file, `${token}\n`, { mode: 0o600 });
      chmodSync(file, 0o600);
    }
  }
  return token;
}
