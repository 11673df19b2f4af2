/**
 * Users in SQLite. Uniqueness of username and e-mail (case-insensitive) is
 * the database's job, so concurrent creates cannot race past a check.
 * Validation names the field. Password hashes never leave this module.
 */
import type { Db } from '../store/database.js';

export interface UserRecord {
  id: number;
  username: string;
  email: string;
  fullName: string;
  isActive: boolean;
  roles: string[];
  createdAt: string;
  updatedAt: string;
  bio: string | null;
  avatarUrl: string | null;
}

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

/** Throws when `value` has more than `max` characters, naming the field and the bound. */
export function checkMaxLength(field: string, value: string, max: number): void {
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

export function checkEmail(email: string): void {
  if (!email) throw new UserValidationError('email', 'email is required');
  checkMaxLength('email', email, USER_LIMITS.email.max);
  if (!EMAIL.test(email)) throw new UserValidationError('email', 'email is not a valid e-mail address');
}

export function checkPassword(password: string): void {
  if (!password) throw new UserValidationError('password', 'password is required');
  const { min, max } = USER_LIMITS.password;
  checkMaxLength('password', password, max);
  if (characters(password) < min) throw new UserValidationError('password', `password must be at least ${min} characters`);
}

export function checkFullName(fullName: string): void {
  checkMaxLength('full_name', fullName, USER_LIMITS.fullName.max);
}

export function checkBio(bio: string): void {
  checkMaxLength('bio', bio, USER_LIMITS.bio.max);
}

export function checkAvatarUrl(url: string): void {
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
export function checkFilter(filter: string): void {
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
  const run = (field: string, value: unknown, check: (value: string) => void, optional = false) => {
    if (optional && (value === undefined || value === null)) return;
    if (value !== undefined && value !== null && typeof value !== 'string') {
      (problems[field] ??= []).push(`${field} must be a string`);
      return;
    }
    try {
      check((value as string | undefined) ?? '');
    } catch (error) {
      if (!(error instanceof UserValidationError)) throw error;
      (problems[field] ??= []).push(error.message);
    }
  };
  run('username', fields.username, checkUsername);
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
}

interface Row {
  id: number;
  username: string;
  email: string;
  full_name: string;
  is_active: number;
  roles: string;
  created_at: string;
  updated_at: string;
  bio: string | null;
  avatar_url: string | null;
}

function toRecord(row: Row): UserRecord {
  return {
    id: row.id,
    username: row.username,
    email: row.email,
    fullName: row.full_name,
    isActive: row.is_active === 1,
    roles: JSON.parse(row.roles) as string[],
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    bio: row.bio,
    avatarUrl: row.avatar_url,
  };
}

function duplicateOf(error: unknown): DuplicateUserError | undefined {
  const { code, message } = error as { code?: string; message?: string };
  if (code !== 'SQLITE_CONSTRAINT_UNIQUE') return undefined;
  return new DuplicateUserError(message?.includes('email') ? 'email' : 'username');
}

const COLUMNS = 'id, username, email, full_name, is_active, roles, created_at, updated_at, bio, avatar_url';

export class UserStore {
  readonly #insert;
  readonly #byId;
  readonly #delete;
  readonly #savepoint;
  readonly #release;
  readonly #rollback;

  constructor(
    readonly db: Db,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.#insert = db.prepare(
      `INSERT INTO users (username, email, full_name, is_active, roles, password_hash, created_at, updated_at, bio, avatar_url)
       VALUES (@username, @email, @fullName, @isActive, @roles, @passwordHash, @at, @at, @bio, @avatarUrl) RETURNING ${COLUMNS}`,
    );
    this.#byId = db.prepare(`SELECT ${COLUMNS} FROM users WHERE id = ?`);
    this.#delete = db.prepare(`DELETE FROM users WHERE id = ? RETURNING ${COLUMNS}`);
    this.#savepoint = db.prepare('SAVEPOINT row');
    this.#release = db.prepare('RELEASE row');
    this.#rollback = db.prepare('ROLLBACK TO row');
  }

  /** Inserts one user; the caller has validated the fields. */
  create(user: NewUser): UserRecord {
    try {
      const row = this.#insert.get({
        username: user.username,
        email: user.email,
        fullName: user.fullName,
        isActive: user.isActive === false ? 0 : 1,
        roles: JSON.stringify(user.roles ?? []),
        passwordHash: user.passwordHash,
        at: this.now().toISOString(),
        bio: user.bio ?? null,
        avatarUrl: user.avatarUrl ?? null,
      }) as Row;
      return toRecord(row);
    } catch (error) {
      throw duplicateOf(error) ?? error;
    }
  }

  /**
   * Inserts many users in one transaction per batch; a row that breaks a
   * uniqueness rule is reported and skipped, the others go in.
   */
  createMany(users: readonly NewUser[]): ({ user: UserRecord } | { error: DuplicateUserError })[] {
    return this.db.transaction(() =>
      users.map((user) => {
        this.#savepoint.run();
        try {
          const created = this.create(user);
          this.#release.run();
          return { user: created };
        } catch (error) {
          this.#rollback.run();
          this.#release.run();
          if (error instanceof DuplicateUserError) return { error };
          throw error;
        }
      }),
    )();
  }

  get(id: number): UserRecord | undefined {
    const row = this.#byId.get(id) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  findByLogin(field: 'username' | 'email', value: string): (UserRecord & { passwordHash: string }) | undefined {
    const row = this.db
      .prepare(`SELECT ${COLUMNS}, password_hash FROM users WHERE ${field === 'email' ? 'email' : 'username'} = ? COLLATE NOCASE`)
      .get(value) as (Row & { password_hash: string }) | undefined;
    return row ? { ...toRecord(row), passwordHash: row.password_hash } : undefined;
  }

  update(id: number, changes: UserChanges): UserRecord | undefined {
    const sets: string[] = [];
    const params: Record<string, unknown> = { id, at: this.now().toISOString() };
    if (changes.username !== undefined) (sets.push('username = @username'), (params.username = changes.username));
    if (changes.email !== undefined) (sets.push('email = @email'), (params.email = changes.email));
    if (changes.fullName !== undefined) (sets.push('full_name = @fullName'), (params.fullName = changes.fullName));
    if (changes.isActive !== undefined) (sets.push('is_active = @isActive'), (params.isActive = changes.isActive ? 1 : 0));
    if (changes.roles !== undefined) (sets.push('roles = @roles'), (params.roles = JSON.stringify(changes.roles)));
    if (sets.length === 0) return this.get(id);
    try {
      const row = this.db.prepare(`UPDATE users SET ${sets.join(', ')}, updated_at = @at WHERE id = @id RETURNING ${COLUMNS}`).get(params) as Row | undefined;
      return row ? toRecord(row) : undefined;
    } catch (error) {
      throw duplicateOf(error) ?? error;
    }
  }

  delete(id: number): UserRecord | undefined {
    const row = this.#delete.get(id) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /** One page of users matching `filter` (case-insensitive, username, e-mail or full name), and the total. */
  list(options: { filter?: string; offset?: number; limit?: number }): { users: UserRecord[]; total: number } {
    if (options.filter) checkFilter(options.filter);
    const filter = options.filter?.trim();
    const where = filter ? `WHERE username LIKE @like ESCAPE '\\' OR email LIKE @like ESCAPE '\\' OR full_name LIKE @like ESCAPE '\\'` : '';
    const params: Record<string, unknown> = {};
    if (filter) params.like = `%${filter.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const total = (this.db.prepare(`SELECT count(*) AS n FROM users ${where}`).get(params) as { n: number }).n;
    const page = options.limit === undefined ? '' : `LIMIT ${Math.max(0, Math.floor(options.limit))} OFFSET ${Math.max(0, Math.floor(options.offset ?? 0))}`;
    const rows = this.db.prepare(`SELECT ${COLUMNS} FROM users ${where} ORDER BY id ${page}`).all(params) as Row[];
    return { users: rows.map(toRecord), total };
  }

  count(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM users').get() as { n: number }).n;
  }
}
