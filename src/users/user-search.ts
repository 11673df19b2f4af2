/**
 * The users of ListUsers: how many match a filter, and a page of them in id
 * order, on either engine, at a cost that does not grow with the table
 * where it need not.
 *
 * - No filter: the total is the `counters` row 'users', which triggers on
 *   `users` keep for every writer (migration 12 / 8); a page is a range of
 *   the primary key after the last id shown (or an OFFSET, for the old
 *   numbered pages).
 * - A filter (a case-insensitive substring of username, e-mail or full
 *   name) is counted through the search index: PostgreSQL's trigram index
 *   (pg_trgm, when the server allowed it), SQLite's FTS5 trigram table
 *   `users_search` (for filters of 3 characters or more; a trigram needs
 *   3). The index only finds candidates: the engine's own LIKE / ILIKE
 *   decides, so the answer is the same with or without it. A page is read
 *   one of two ways, chosen from the count: walking the ids in order past
 *   the rows that do not match (about page / share-of-matches rows: flat
 *   when many rows match), or taking the matches from the index and
 *   sorting them (about as many rows as match: cheap when few do).
 */
import { containsPattern, type Param, type Sql } from '../store/sql.js';
import { toRecord, USER_COLUMNS, type UserRecord, type UserRow } from './user-record.js';

/**
 * How much more a match read through the index costs than a row walked
 * past in id order: a heap fetch and a recheck against a read in order.
 * Only the order of magnitude matters; it sets where the two ways cross.
 */
const INDEX_ROW_COST = 2;
/** A trigram index cannot find a substring shorter than this many characters. */
const TRIGRAM = 3;

const USERS = "SELECT value FROM counters WHERE name = 'users'";
const USERS_COUNT = "SELECT value AS n FROM counters WHERE name = 'users'";
const PAGE = `SELECT ${USER_COLUMNS} FROM users WHERE id > $1 ORDER BY id LIMIT CAST($2 AS INTEGER) OFFSET CAST($3 AS INTEGER)`;

/** The statements of a filtered list on one engine; `$1` is the LIKE pattern throughout. */
interface FilterStatements {
  /** `users` (the counter) and `n` (the matches); $2 the FTS5 phrase when `indexed`. */
  count(indexed: boolean): string;
  /** Walks the ids after $2; the page is the window $3 (limit) and $4 (offset). */
  walk: string;
  /** The matches after $2 through the index, sorted, in the same window; $5 the FTS5 phrase on SQLite. */
  matches: string;
}

/**
 * Which fields a filter matches: 'all' (username, e-mail, full name) for
 * those who see every e-mail; 'public' (username, full name) for the
 * others, so that a filter cannot tell them whose address contains what.
 */
export type SearchScope = 'all' | 'public';

function statementsOf(dialect: Sql['dialect'], scope: SearchScope): FilterStatements {
  const like = dialect === 'postgres' ? 'ILIKE' : 'LIKE';
  const email = scope === 'all' ? ` OR email ${like} $1 ESCAPE '\\'` : '';
  const matching = `(username ${like} $1 ESCAPE '\\'${email} OR full_name ${like} $1 ESCAPE '\\')`;
  const total = `(${USERS}) AS users`;
  const window = 'LIMIT CAST($3 AS INTEGER) OFFSET CAST($4 AS INTEGER)';
  if (dialect === 'postgres') {
    return {
      // The planner takes the trigram index (a bitmap of the candidates, each rechecked) when the pattern is selective.
      count: () => `SELECT ${total}, count(*) AS n FROM users WHERE ${matching}`,
      // OFFSET 0 keeps the filter out of the subquery, so that no plan (a generic one of this prepared statement
      // included) trades the walk for the index: the outer query has no ORDER BY, so the subquery is planned for
      // the first rows, in id order, and its order is what the scan of it returns.
      walk: `SELECT * FROM (SELECT ${USER_COLUMNS} FROM users WHERE id > $2 ORDER BY id OFFSET 0) AS walked WHERE ${matching} ${window}`,
      // Every match, from the index (the subquery is planned for all its rows), then the page of them after $2.
      matches: `SELECT * FROM (SELECT ${USER_COLUMNS} FROM users WHERE ${matching} OFFSET 0) AS matched WHERE id > $2 ORDER BY id ${window}`,
    };
  }
  // SQLite's LIKE folds ASCII letters only; FTS5's trigrams fold all of Unicode. The table finds a superset of the
  // matches, and LIKE keeps the ones it would have kept by itself.
  const candidates = (phrase: string, after = '') => `id IN (SELECT rowid FROM users_search WHERE users_search MATCH ${phrase}${after})`;
  return {
    count: (indexed) => `SELECT ${total}, count(*) AS n FROM users WHERE ${indexed ? `${candidates('$2')} AND ` : ''}${matching}`,
    walk: `SELECT ${USER_COLUMNS} FROM users WHERE id > $2 AND ${matching} ORDER BY id ${window}`,
    // The IN list is kept sorted by rowid, so the users come out in id order and LIMIT stops the reading.
    matches: `SELECT ${USER_COLUMNS} FROM users WHERE ${candidates('$5', ' AND rowid > $2')} AND ${matching} ORDER BY id ${window}`,
  };
}

const STATEMENTS = {
  all: { sqlite: statementsOf('sqlite', 'all'), postgres: statementsOf('postgres', 'all') },
  public: { sqlite: statementsOf('sqlite', 'public'), postgres: statementsOf('postgres', 'public') },
} as const;

/** Where a page starts: after the last id shown (a page token), and how many rows of the list to skip after it. */
export interface PagePlace {
  afterId: number;
  offset: number;
  limit: number;
}

/** One filter's users: built by UserStore.search, which checks the filter; count first, then pages. */
export class UserSearch {
  /** The filter as applied: trimmed; empty for every user. */
  readonly filter: string;
  readonly #sql: Sql;
  readonly #pattern: string;
  /** The FTS5 query (a phrase) that finds candidates on SQLite; undefined where no trigram index can serve. */
  readonly #phrase: string | undefined;
  readonly #statements: FilterStatements;
  #counted: { users: number; matches: number } | undefined;

  constructor(sql: Sql, filter: string, scope: SearchScope = 'all') {
    this.#sql = sql;
    this.filter = filter.trim();
    this.#pattern = containsPattern(this.filter);
    this.#statements = STATEMENTS[scope][sql.dialect];
    // FTS5's column filter keeps the candidates to the fields the scope matches.
    const columns = scope === 'all' ? '' : '{username full_name} : ';
    this.#phrase = sql.dialect === 'sqlite' && [...this.filter].length >= TRIGRAM ? `${columns}"${this.filter.replace(/"/g, '""')}"` : undefined;
  }

  /** The users that match the filter, on all pages. */
  async count(): Promise<number> {
    if (!this.filter) {
      const row = await this.#sql.one<{ n: number }>(USERS_COUNT);
      if (!row) throw new Error("the counters row 'users' is missing: the schema was not migrated");
      return Number(row.n);
    }
    const params: Param[] = this.#phrase ? [this.#pattern, this.#phrase] : [this.#pattern];
    const row = (await this.#sql.one<{ users: number; n: number }>(this.#statements.count(this.#phrase !== undefined), params))!;
    this.#counted = { users: Number(row.users), matches: Number(row.n) };
    return this.#counted.matches;
  }

  /** Up to `limit` users in id order, after `afterId` and `offset` more. */
  async page({ afterId, offset, limit }: PagePlace): Promise<UserRecord[]> {
    if (!this.filter) return (await this.#sql.all<UserRow>(PAGE, [afterId, limit, offset])).map(toRecord);
    if (this.#counted?.matches === 0) return [];
    const statements = this.#statements;
    const params: Param[] = [this.#pattern, afterId, limit, offset];
    let text = statements.walk;
    if (this.#throughIndex(offset + limit)) {
      text = statements.matches;
      if (this.#phrase) params.push(this.#phrase);
    }
    return (await this.#sql.all<UserRow>(text, params)).map(toRecord);
  }

  /**
   * Whether `rows` matches are cheaper taken from the index than found by
   * walking: the walk reads about rows × users / matches rows, the index
   * every match. Without a count (or an index), the walk.
   */
  #throughIndex(rows: number): boolean {
    if (!this.#counted || (this.#sql.dialect === 'sqlite' && !this.#phrase)) return false;
    const { users, matches } = this.#counted;
    return matches * matches * INDEX_ROW_COST < rows * users;
  }
}
