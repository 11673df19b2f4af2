/**
 * Users, on either engine (SQLite or PostgreSQL, through store/sql.ts).
 * Uniqueness of username and e-mail (case-insensitive) is the database's
 * job, so concurrent creates, on one instance or several, cannot race past
 * a check. Validation names the field. Password hashes never leave this
 * module. Every change is logged (change-log.ts) in its own transaction,
 * for the watchers of every instance.
 */
import { UniqueViolation, type Param, type Sql } from '../store/sql.js';
import { BatchedRead, inList } from '../store/batched-read.js';
import type { UserChangeLog, UserChangeType } from './change-log.js';
import { toRecord, USER_COLUMNS, type UserRecord, type UserRow } from './user-record.js';
import { UserSearch, type SearchScope } from './user-search.js';

export type { UserRecord } from './user-record.js';

export interface NewUser {
  username: string;
  email: string;
  fullName: string;
  passwordHash: string;
  roles?: string[] | undefined;
  isActive?: boolean | undefined;
  bio?: string | null | undefined;
  avatarUrl?: string | null | undefined;
}

export type UserChanges = Partial<Pick<UserRecord, 'username' | 'email' | 'fullName' | 'isActive' | 'roles'>>;

/** A rule a value broke, with the field it concerns. */
export class UserValidationError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export class DuplicateUserError extends Error {
  constructor(readonly field: 'username' | 'email') {
    super(`a user with this ${field === 'email' ? 'e-mail' : 'username'} already exists`);
  }
}

// A pragmatic address check: something@domain.tld, no spaces; the mailbox proves the rest.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const USERNAME_CHARS = /^[\p{L}\p{N}_.-]+$/u;
const ROLE = /^[a-z][a-z0-9_-]{0,31}$/;

/**
 * Bounds of every user field and of the list filter, shared by every front
 * door (gRPC, the blog's POST /users): a request cannot make the server
 * store or search for more than a person would type. Lengths count
 * characters (code points), not bytes or UTF-16 units.
 */
export const USER_LIMITS = {
  username: { min: 3, max: 20 },
  email: { max: 254 },
  password: { min: 8, max: 1024 },
  fullName: { max: 200 },
  bio: { max: 500 },
  avatarUrl: { max: 2048 },
  roles: { max: 20 },
  role: { max: 32 },
  // SQLite refuses LIKE patterns over 50,000 bytes; a filter is a few words.
  filter: { max: 200 },
} as const;

/** Length in characters, as a person counts them. */
export function characters(value: string): number {
  let count = 0;
  for (const _ of value) count++;
  return count;
}

/**
 * Throws when `value` has more than `max` characters, naming the field and
 * the bound, or holds NUL (U+0000), which PostgreSQL's text cannot store or
 * compare: refused on every backend alike.
 */
export function checkMaxLength(field: string, value: string, max: number): void {
  if (value.includes('\u0000')) throw new UserValidationError(field, `${field} must not contain NUL (U+0000)`);
  // Each character is one or two UTF-16 units, so short strings need no counting.
  if (value.length <= max) return;
  const length = characters(value);
  if (length > max) throw new UserValidationError(field, `${field} must be at most ${max} characters; it is ${length}`);
}

/** Throws when `list` has more than `max` entries, naming the field and the bound. */
export function checkMaxEntries(field: string, list: readonly unknown[], max: number): void {
  if (list.length > max) throw new UserValidationError(field, `${field} takes at most ${max} entries; it has ${list.length}`);
}

export function checkUsername(username: string): void {
  if (!username) throw new UserValidationError('username', 'username is required');
  const { min, max } = USER_LIMITS.username;
  const length = characters(username);
  if (length < min || length > max) throw new UserValidationError('username', `username must be ${min} to ${max} characters; it is ${length}`);
  if (!USERNAME_CHARS.test(username)) throw new UserValidationError('username', 'username may hold letters, digits, ".", "_" and "-" only');
}

/**
 * Names the system itself goes by: the admin token's posts are signed `admin`, and an account called so (or
 * `Admin`, `ＡＤＭＩＮ`) could pass for it. Nobody may take one, the admin token included; accounts that hold one
 * from before keep it (they load, log in and may keep the name), but nobody renames an account to one.
 */
const RESERVED_USERNAMES: readonly string[] = ['admin', 'administrator', 'root', 'system', 'miniapp'];

/** A username as the reserved names are compared: NFKC (full-width and other compatibility forms folded) and lowercased. */
export function usernameKey(username: string): string {
  return username.normalize('NFKC').toLowerCase().normalize('NFKC');
}

export function isReservedUsername(username: string): boolean {
  return RESERVED_USERNAMES.includes(usernameKey(username));
}

/** Throws when `username` is one of the names the system uses (see RESERVED_USERNAMES). */
export function checkUnreservedUsername(username: string): void {
  if (isReservedUsername(username)) {
    throw new UserValidationError(
      'username',
      `username "${username}" is reserved: ${RESERVED_USERNAMES.join(', ')} (in any case or width) are names the system itself uses`,
    );
  }
}

/** A new account's username: well-formed and not reserved. */
function checkNewUsername(username: string): void {
  checkUsername(username);
  checkUnreservedUsername(username);
}

export function checkEmail(email: string): void {
  if (!email) throw new UserValidationError('email', 'email is required');
  checkMaxLength('email', email, USER_LIMITS.email.max);
  if (!EMAIL.test(email)) throw new UserValidationError('email', 'email is not a valid e-mail address');
}

function checkPassword(password: string): void {
  if (!password) throw new UserValidationError('password', 'password is required');
  const { min, max } = USER_LIMITS.password;
  checkMaxLength('password', password, max);
  if (characters(password) < min) throw new UserValidationError('password', `password must be at least ${min} characters`);
}

export function checkFullName(fullName: string): void {
  checkMaxLength('full_name', fullName, USER_LIMITS.fullName.max);
}

function checkBio(bio: string): void {
  checkMaxLength('bio', bio, USER_LIMITS.bio.max);
}

function checkAvatarUrl(url: string): void {
  checkMaxLength('avatar_url', url, USER_LIMITS.avatarUrl.max);
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
    throw new UserValidationError('avatar_url', 'avatar_url must be an http or https URL');
  }
}

/** A list filter: a few words, never a pattern the database refuses. */
function checkFilter(filter: string): void {
  checkMaxLength('filter', filter, USER_LIMITS.filter.max);
}

/** Every problem of a new user's fields, by field: `{ username: ['...'], password: ['...'] }`. */
export function newUserProblems(fields: {
  username?: unknown;
  email?: unknown;
  password?: unknown;
  full_name?: unknown;
  bio?: unknown;
  avatar_url?: unknown;
}): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  const add = (field: string, message: string) => {
    problems[field] = [...(problems[field] ?? []), message];
  };
  const run = (field: string, value: unknown, check: (value: string) => void, optional = false) => {
    if (optional && (value === undefined || value === null)) return;
    if (value !== undefined && value !== null && typeof value !== 'string') {
      add(field, `${field} must be a string`);
      return;
    }
    try {
      check((value as string | undefined) ?? '');
    } catch (error) {
      if (!(error instanceof UserValidationError)) throw error;
      add(field, error.message);
    }
  };
  run('username', fields.username, checkNewUsername);
  run('email', fields.email, checkEmail);
  run('password', fields.password, checkPassword);
  run('full_name', fields.full_name, checkFullName, true);
  run('bio', fields.bio, checkBio, true);
  run('avatar_url', fields.avatar_url, checkAvatarUrl, true);
  return problems;
}

export function checkRoles(roles: readonly string[]): void {
  checkMaxEntries('roles', roles, USER_LIMITS.roles.max);
  for (const role of roles) {
    if (!ROLE.test(role)) {
      // The message quotes the role, so a huge one is cut rather than echoed whole.
      const shown = role.length > USER_LIMITS.role.max ? `${role.slice(0, USER_LIMITS.role.max)}...` : role;
      throw new UserValidationError('roles', `role "${shown}" must be lower-case letters, digits, "_" or "-" (at most ${USER_LIMITS.role.max} characters)`);
    }
  }
  // A set: a role given twice would be stored twice, and take one of the places the bound allows.
  const twice = roles.find((role, i) => roles.indexOf(role) !== i);
  if (twice !== undefined) throw new UserValidationError('roles', `roles names "${twice}" twice`);
}

function recordOf(row: UserRow | undefined): UserRecord | undefined {
  return row ? toRecord(row) : undefined;
}

/** The unique indexes are users_username and users_email on both engines. */
function duplicateOf(error: unknown): DuplicateUserError | undefined {
  if (!(error instanceof UniqueViolation)) return undefined;
  if (error.constraint === 'users_email') return new DuplicateUserError('email');
  if (error.constraint === 'users_username') return new DuplicateUserError('username');
  return undefined;
}

/**
 * The statements that differ between the engines: a comparison that
 * ignores case the way the unique indexes do (so that they serve it:
 * NOCASE in SQLite, lower() in PostgreSQL). The list's filter is
 * user-search.ts's.
 */
function dialectOf(sql: Sql) {
  const postgres = sql.dialect === 'postgres';
  const same = (column: string, param: string) => (postgres ? `lower(${column}) = lower(${param})` : `${column} = ${param} COLLATE NOCASE`);
  return {
    byUsername: `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE ${same('username', '$1')}`,
    byEmail: `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE ${same('email', '$1')}`,
    usernameTaken: `SELECT 1 AS taken FROM users WHERE ${same('username', '$1')}`,
  };
}

const INSERT = `INSERT INTO users (username, email, full_name, is_active, roles, password_hash, created_at, updated_at, bio, avatar_url)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)`;
const BY_ID = `SELECT ${USER_COLUMNS} FROM users WHERE id = $1`;
const byIds = (condition: string) => `SELECT ${USER_COLUMNS} FROM users WHERE ${condition}`;
const DELETE = `DELETE FROM users WHERE id = $1 RETURNING ${USER_COLUMNS}`;

export class UserStore {
  readonly #text: ReturnType<typeof dialectOf>;
  /** PostgreSQL: the users asked for by id in one turn, read together (see BatchedRead). */
  readonly #byId: BatchedRead<number, UserRow> | undefined;

  constructor(
    readonly sql: Sql,
    private readonly changes: UserChangeLog,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.#text = dialectOf(sql);
    if (sql.dialect === 'postgres') {
      this.#byId = new BatchedRead(async (ids) => {
        const { condition, params } = inList('id', ids);
        return new Map((await sql.all<UserRow>(byIds(condition), params)).map((row) => [Number(row.id), row]));
      });
    }
  }

  #params(user: NewUser, at: string): Param[] {
    return [
      user.username,
      user.email,
      user.fullName,
      user.isActive !== false,
      JSON.stringify(user.roles ?? []),
      user.passwordHash,
      at,
      user.bio ?? null,
      user.avatarUrl ?? null,
    ];
  }

  /** Inserts one user; the caller has validated the fields. */
  async create(user: NewUser): Promise<UserRecord> {
    try {
      return await this.sql.transaction(async (tx) => {
        const created = toRecord((await tx.one<UserRow>(`${INSERT} RETURNING ${USER_COLUMNS}`, this.#params(user, this.now().toISOString())))!);
        await this.changes.append(tx, [['CREATED', created]]);
        return created;
      });
    } catch (error) {
      throw duplicateOf(error) ?? error;
    }
  }

  /**
   * Inserts many users in one transaction; a row that breaks a uniqueness
   * rule is reported and skipped, the others go in.
   */
  async createMany(users: readonly NewUser[]): Promise<({ user: UserRecord } | { error: DuplicateUserError })[]> {
    return this.sql.transaction(async (tx) => {
      const at = this.now().toISOString();
      const results: ({ user: UserRecord } | { error: DuplicateUserError })[] = [];
      const created: [UserChangeType, UserRecord][] = [];
      for (const user of users) {
        // A refused row leaves nothing to roll back: no savepoint per row, on either engine.
        const row = await tx.one<UserRow>(`${INSERT} ON CONFLICT DO NOTHING RETURNING ${USER_COLUMNS}`, this.#params(user, at));
        if (row) {
          const record = toRecord(row);
          created.push(['CREATED', record]);
          results.push({ user: record });
          continue;
        }
        const taken = await tx.one(this.#text.usernameTaken, [user.username]);
        results.push({ error: new DuplicateUserError(taken ? 'username' : 'email') });
      }
      await this.changes.append(tx, created);
      return results;
    });
  }

  get(id: number): Promise<UserRecord | undefined> {
    return (this.#byId ? this.#byId.get(id) : this.sql.one<UserRow>(BY_ID, [id])).then(recordOf);
  }

  async findByLogin(field: 'username' | 'email', value: string): Promise<(UserRecord & { passwordHash: string }) | undefined> {
    // No stored username or e-mail holds NUL (checkMaxLength), and PostgreSQL cannot compare text that does.
    if (value.includes('\u0000')) return undefined;
    const row = await this.sql.one<UserRow & { password_hash: string }>(field === 'email' ? this.#text.byEmail : this.#text.byUsername, [value]);
    return row ? { ...toRecord(row), passwordHash: row.password_hash } : undefined;
  }

  async update(id: number, changes: UserChanges): Promise<UserRecord | undefined> {
    const sets: string[] = [];
    const params: Param[] = [id, this.now().toISOString()];
    const set = (column: string, value: Param) => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    if (changes.username !== undefined) set('username', changes.username);
    if (changes.email !== undefined) set('email', changes.email);
    if (changes.fullName !== undefined) set('full_name', changes.fullName);
    if (changes.isActive !== undefined) set('is_active', changes.isActive);
    if (changes.roles !== undefined) set('roles', JSON.stringify(changes.roles));
    try {
      return await this.sql.transaction(async (tx) => {
        // An update that changes nothing is still announced, as it always was; it does not touch updated_at.
        const row =
          sets.length === 0
            ? await tx.one<UserRow>(BY_ID, [id])
            : await tx.one<UserRow>(`UPDATE users SET ${sets.join(', ')}, updated_at = $2 WHERE id = $1 RETURNING ${USER_COLUMNS}`, params);
        if (!row) return undefined;
        const updated = toRecord(row);
        await this.changes.append(tx, [['UPDATED', updated]]);
        return updated;
      });
    } catch (error) {
      throw duplicateOf(error) ?? error;
    }
  }

  async delete(id: number): Promise<UserRecord | undefined> {
    return this.sql.transaction(async (tx) => {
      const row = await tx.one<UserRow>(DELETE, [id]);
      if (!row) return undefined;
      const deleted = toRecord(row);
      await this.changes.append(tx, [['DELETED', deleted]]);
      return deleted;
    });
  }

  /**
   * The users matching `filter` (case-insensitive, username, e-mail or full
   * name, or without e-mail in the 'public' scope; empty: every user): count them, then read pages (user-search.ts).
   */
  search(filter = '', scope: SearchScope = 'all'): UserSearch {
    checkFilter(filter);
    return new UserSearch(this.sql, filter, scope);
  }

  /** How many users there are: the counter the triggers on `users` keep, not a count of the table. */
  count(): Promise<number> {
    return this.search().count();
  }
}
