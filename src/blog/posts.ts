/**
 * Blog posts, one repository for both backends (store/sql.ts). Tags live
 * twice: as a JSON array on the post (the author's spelling and order) and
 * lowercased in post_tags (for the OR filter, indexed), so that one
 * comparison serves both engines.
 *
 * The post lists are cached (list-cache.ts) under the posts' version, which
 * changes with every write that commits, whichever instance made it.
 */
import { isUtf8 } from 'node:buffer';
import type { Param, Sql } from '../store/sql.js';
import type { VersionLease } from '../store/version-lease.js';
import { FreshRead } from '../store/fresh-read.js';
import { ListCache } from './list-cache.js';
import {
  ListingPlans,
  POST_COLUMNS,
  type CountSource,
  type ListingPlan,
  type PageCursor,
  type PageStart,
  type PostFilter,
  type PostSort,
} from './post-listing.js';

/** A post's row as the store reads it (never PostgreSQL's answer_json, which only list pages join). */
const POST_ROW = POST_COLUMNS.join(', ');

/** The event of a new post (spec 002, Part B "Webhook"): its payload's data is the post. */
export const POST_CREATED = 'post.created';

export interface Post {
  id: number;
  title: string;
  content: string;
  author: string;
  /** Written with the admin token (author `admin`, no account): what no account's post can say. */
  author_is_admin: boolean;
  created_at: string;
  updated_at: string;
  tags: string[];
  is_published: boolean;
}

export type { PostFilter, PostSort } from './post-listing.js';

export interface ListOptions {
  sort?: PostSort;
  /** Rows of the page; all of them without it. */
  limit?: number;
  /** Where the page starts: rows skipped, or (instead) the rows after or before a cursor. */
  offset?: number;
  after?: PageCursor;
  before?: PageCursor;
  /** The posts' version the caller read before; read here otherwise. */
  version?: string;
}

/** One page of a list, as the API answers it. */
export interface PostPage {
  /** The posts' JSON array: its UTF-8 bytes (SQLite), or the text (PostgreSQL). */
  json: Buffer | string;
  total: number;
  /** The posts' version the page was read at. */
  version: string;
  /** How many posts the page holds, and the places of its first and last (the cursors of previous and next). */
  shown: number;
  first: PageCursor | undefined;
  last: PageCursor | undefined;
  /** Whether posts lie before the page's first and after its last, in the list's order. */
  moreBefore: boolean;
  moreAfter: boolean;
  /** A page asked for before a cursor that came back as the list's first page (the cursor lay within it). */
  isFirstPage: boolean;
}

/** Runs inside the transaction that writes a post: whatever it writes through `tx` commits with the post, or not at all. */
export type InTransaction<T> = (value: T, tx: Sql) => Promise<void> | void;

interface Row {
  id: number;
  title: string;
  content: string;
  author: string;
  author_id: number | null;
  /** 0 or 1 from SQLite, a boolean from PostgreSQL. */
  author_is_admin: number | boolean;
  tags: string;
  /** 0 or 1 from SQLite, a boolean from PostgreSQL. */
  is_published: number | boolean;
  created_at: string;
  updated_at: string;
  published_at: string | null;
}

function toPost(row: Row): Post {
  return {
    id: Number(row.id),
    title: row.title,
    content: row.content,
    author: row.author,
    author_is_admin: row.author_is_admin === true || row.author_is_admin === 1,
    created_at: row.created_at,
    updated_at: row.updated_at,
    tags: JSON.parse(row.tags) as string[],
    is_published: row.is_published === true || row.is_published === 1,
  };
}

/** Tags as given, trimmed, without empties or case-insensitive duplicates. */
function cleanTags(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const raw of tags) {
    const tag = raw.trim();
    if (tag && !seen.has(tag.toLowerCase())) {
      seen.add(tag.toLowerCase());
      out.push(tag);
    }
  }
  return out;
}

/**
 * `(post, tag, ...)` rows for one post's tags, lowercased (the filter compares lowercased values), with the post's
 * is_published and created_at: a tag's page in date order is a range of post_tags' own index.
 */
function tagRows(post: Row, tags: readonly string[]): { text: string; params: Param[] } {
  const params: Param[] = [post.id, post.is_published === true || post.is_published === 1, post.created_at, ...tags.map((tag) => tag.toLowerCase())];
  const values = tags.map((_, i) => `($1, $${i + 4}, $2, $3)`).join(', ');
  return { text: `INSERT INTO post_tags (post_id, tag, is_published, created_at) VALUES ${values} ON CONFLICT DO NOTHING`, params };
}

/** The answer to a page's statement: one row, the page's JSON in it (a BLOB from SQLite, text from PostgreSQL). */
interface PageRow {
  version: number | string | null;
  total: number;
  json: Buffer | string;
  shown: number;
  first_key: string | null;
  first_id: number | null;
  last_key: string | null;
  last_id: number | null;
  more_before?: boolean | number;
  more_after?: boolean | number;
  /** A page by number on SQLite: the [key, id] of each of its posts, in order (JSON), instead of the ends. */
  places?: string;
}

const cursorOf = (key: string | null, id: number | null): PageCursor | undefined => (key === null || id === null ? undefined : { key, id: Number(id) });

/** The places of a page's first and last posts: given, or taken from the places of all its posts. */
function ends(row: PageRow): { first: PageCursor | undefined; last: PageCursor | undefined } {
  if (row.places === undefined) return { first: cursorOf(row.first_key, row.first_id), last: cursorOf(row.last_key, row.last_id) };
  const places = JSON.parse(row.places) as [string, number][];
  const first = places[0];
  const last = places.at(-1);
  return { first: first && cursorOf(first[0], first[1]), last: last && cursorOf(last[0], last[1]) };
}

export interface PostStoreOptions {
  /** PostgreSQL: the posts' version as this instance knows it without asking (store/version-lease.ts). */
  lease?: VersionLease | undefined;
}

export class PostStore {
  /** SQLite: writes through this store; with data_version (commits by other connections) it says whether lists changed. */
  #writes = 0;
  /** Counts of the filters that are counted (not kept), under the posts' version they were counted at. */
  readonly #counts = new ListCache<number>(256);
  /** The last count seen of each filter, whatever its version: enough to choose the nearer end of a list. */
  readonly #estimates = new ListCache<number>(256);
  /** PostgreSQL: the 'posts' counter, one read shared by the requests that ask at the same time (never one started before they asked). */
  readonly #sharedVersion = new FreshRead(async () => {
    const row = await this.sql.one<{ value: number }>("SELECT value FROM counters WHERE name = 'posts'");
    return String(row?.value ?? 0);
  });
  readonly #lease: VersionLease | undefined;
  /** The lists' plans and statements, written once for each list asked for (see ListingPlans). */
  readonly #plans: ListingPlans;

  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date = () => new Date(),
    options: PostStoreOptions = {},
  ) {
    this.#lease = options.lease;
    this.#plans = new ListingPlans(sql.dialect);
  }

  /**
   * Changes whenever the posts may have changed. Caches of list answers are
   * keyed on it, and read it before the data, so an entry never holds data
   * older than its version. PostgreSQL: the 'posts' counter, bumped in every
   * transaction that writes posts, on any instance: a write acknowledged
   * anywhere has changed it (known without asking while this instance holds
   * its lease, see knownVersion). SQLite: the writes through this store and
   * the commits of other connections to the file.
   */
  async version(): Promise<string> {
    if (this.sql.dialect === 'postgres') return this.knownVersion() ?? this.#sharedVersion.get();
    const row = await this.sql.one<{ data_version: number }>('PRAGMA data_version');
    return `${this.#writes}:${row?.data_version ?? 0}`;
  }

  /**
   * PostgreSQL: the posts' version when this instance can vouch for it
   * without asking (it holds its lease: every writer waits until it has
   * heard of each write), else undefined.
   */
  knownVersion(): string | undefined {
    return this.#lease?.known();
  }

  /** Marks the posts changed, inside the transaction that changes them; PostgreSQL: the version it moved to. */
  async #changed(tx: Sql): Promise<number | undefined> {
    if (tx.dialect === 'postgres') {
      // A trigger announces the new value on commit (store/blog-listing-schema.ts), to every instance's lease.
      const row = await tx.one<{ value: number }>("UPDATE counters SET value = value + 1 WHERE name = 'posts' RETURNING value");
      return row === undefined ? undefined : Number(row.value);
    }
    // Counted before the commit: a list read meanwhile waits for the commit (one SQLite connection), and a
    // rolled-back write only costs a recomputation.
    this.#writes++;
    return undefined;
  }

  /** A write that committed the posts' version `moved`: acknowledged once every instance that answers lists knows it. */
  async #settled<T>(written: { result: T; moved: number | undefined }): Promise<T> {
    if (written.moved !== undefined) await this.#lease?.settled(written.moved);
    return written.result;
  }

  /** Writes a post; `inTransaction` runs in the same transaction (the webhook deliveries of a published post). */
  async create(
    input: { title: string; content: string; tags: string[]; authorId: number | null; author: string; authorIsAdmin?: boolean; isPublished?: boolean },
    inTransaction?: InTransaction<Post>,
  ): Promise<Post> {
    const tags = cleanTags(input.tags);
    const at = this.now().toISOString();
    const published = input.isPublished !== false;
    const written = await this.sql.transaction(async (tx) => {
      const row = (await tx.one<Row>(
        `INSERT INTO posts (title, content, author_id, author, author_is_admin, tags, is_published, created_at, updated_at, published_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) RETURNING ${POST_ROW}`,
        [input.title, input.content, input.authorId, input.author, input.authorIsAdmin === true, JSON.stringify(tags), published, at, published ? at : null],
      ))!;
      if (tags.length > 0) {
        const insert = tagRows(row, tags);
        await tx.run(insert.text, insert.params);
      }
      const moved = await this.#changed(tx);
      const post = toPost(row);
      await inTransaction?.(post, tx);
      return { result: post, moved };
    });
    return this.#settled(written);
  }

  async get(id: number): Promise<(Post & { authorId: number | null; firstPublished: boolean }) | undefined> {
    const row = await this.sql.one<Row>(`SELECT ${POST_ROW} FROM posts WHERE id = $1`, [id]);
    return row ? { ...toPost(row), authorId: row.author_id === null ? null : Number(row.author_id), firstPublished: row.published_at !== null } : undefined;
  }

  /**
   * Applies the given fields; says whether this update published the post
   * for the first time (which is when the webhook fires). `inTransaction`
   * runs in the same transaction.
   */
  async update(
    id: number,
    changes: { title?: string | undefined; content?: string | undefined; tags?: string[] | undefined; is_published?: boolean | undefined },
    inTransaction?: InTransaction<{ post: Post; firstPublication: boolean }>,
  ): Promise<{ post: Post; firstPublication: boolean } | undefined> {
    const written = await this.sql.transaction(async (tx) => {
      // PostgreSQL: the row stays locked until the commit, so two updates that publish the same draft
      // cannot both see it unpublished (SQLite's write transaction already excludes the other).
      const current = await tx.one<Row>(`SELECT ${POST_ROW} FROM posts WHERE id = $1${tx.dialect === 'postgres' ? ' FOR UPDATE' : ''}`, [id]);
      if (!current) return { result: undefined, moved: undefined };
      const at = this.now().toISOString();
      const firstPublication = changes.is_published === true && current.published_at === null;
      const tags = changes.tags === undefined ? undefined : cleanTags(changes.tags);
      // A change of is_published reaches the post's tags by trigger (store/blog-listing-schema.ts).
      const row = (await tx.one<Row>(
        `UPDATE posts SET title = $2, content = $3, tags = $4, is_published = $5,
           updated_at = $6, published_at = COALESCE(published_at, $7) WHERE id = $1 RETURNING ${POST_ROW}`,
        [
          id,
          changes.title ?? current.title,
          changes.content ?? current.content,
          tags === undefined ? current.tags : JSON.stringify(tags),
          changes.is_published ?? (current.is_published === true || current.is_published === 1),
          at,
          changes.is_published ? at : null,
        ],
      ))!;
      if (tags !== undefined) {
        await tx.run('DELETE FROM post_tags WHERE post_id = $1', [id]);
        if (tags.length > 0) {
          const insert = tagRows(row, tags);
          await tx.run(insert.text, insert.params);
        }
      }
      const moved = await this.#changed(tx);
      const result = { post: toPost(row), firstPublication };
      await inTransaction?.(result, tx);
      return { result, moved };
    });
    return this.#settled(written);
  }

  /** Filtered posts (AND between filters, OR between tags), one page (all of them without a limit), and the total. */
  async list(filter: PostFilter, options: ListOptions = {}): Promise<{ posts: Post[]; total: number }> {
    const { rows } = await this.#run<Row & { total: number }>(filter, options, 'rows');
    return { posts: rows.filter((row) => row.id !== null).map(toPost), total: Number(rows[0]?.total ?? 0) };
  }

  /**
   * The same page as `list`, as the UTF-8 bytes of its posts' JSON (what
   * Buffer.from(JSON.stringify(list(...).posts)) gives, byte for byte),
   * written by the database: no post crosses into JavaScript as an object
   * (see post-listing.ts), with its count and where it lies.
   * test/blog/posts.test.ts holds the two to the same bytes.
   */
  async page(filter: PostFilter, options: ListOptions = {}): Promise<PostPage> {
    const { rows, version, start } = await this.#run<PageRow>(filter, options, 'json');
    const offset = 'offset' in start ? start.offset : undefined;
    const row = rows[0]!;
    // Text written with a lone surrogate is stored by SQLite as its WTF-8 bytes, which are not UTF-8: those pages
    // are decoded as list() decodes them (each invalid sequence a U+FFFD) and encoded again, so that no client meets
    // invalid UTF-8. PostgreSQL's text is UTF-8.
    const json = typeof row.json === 'string' ? row.json : isUtf8(row.json) ? row.json : Buffer.from(row.json.toString('utf8'));
    const total = Number(row.total);
    const shown = Number(row.shown);
    const { first, last } = ends(row);
    const moreBefore = offset === undefined ? Boolean(row.more_before) : offset > 0 && total > 0;
    // Written out rather than spread: two object spreads a page, on the path of every uncached list.
    return {
      json,
      total,
      shown,
      first,
      last,
      version,
      moreBefore,
      moreAfter: offset === undefined ? Boolean(row.more_after) : offset + shown < total,
      isFirstPage: options.before !== undefined && !moreBefore,
    };
  }

  /** Same as page(), the JSON and the count only (the v1 list and older callers). */
  async listJson(filter: PostFilter, options: ListOptions = {}): Promise<{ json: Buffer; total: number }> {
    const { json, total } = await this.page(filter, options);
    return { json: typeof json === 'string' ? Buffer.from(json) : json, total };
  }

  /**
   * Runs a page's statement: from where the options say, with the count the
   * cheapest way there is, at the posts' version the statement read
   * (PostgreSQL) or read just before (SQLite).
   */
  async #run<T>(filter: PostFilter, options: ListOptions, shape: 'json' | 'rows'): Promise<{ rows: T[]; version: string; start: PageStart }> {
    const { sql } = this;
    const plan = this.#plans.plan(filter, options.sort ?? '-created_at');
    const limit = options.limit === undefined ? undefined : Math.max(0, Math.floor(options.limit));
    // SQLite's version is read before the data (an entry is never older than its version); PostgreSQL's comes with it.
    const before = sql.dialect === 'sqlite' ? (options.version ?? (await this.version())) : options.version;
    const known = before === undefined || plan.keptCount ? undefined : this.#counts.get(plan.countKey, before);
    let count: CountSource = plan.keptCount ? { kind: 'kept' } : known !== undefined ? { kind: 'known', total: known } : { kind: 'counted' };
    let start: PageStart;
    if (options.after) start = { after: options.after };
    else if (options.before) start = { before: options.before };
    else {
      const offset = Math.max(0, Math.floor(options.offset ?? 0));
      start = { offset, fromEnd: limit !== undefined && offset > 0 && (await this.#nearerEnd(plan, offset, limit, count)) };
    }
    for (let attempt = 1; ; attempt++) {
      const query = plan.page(start, limit, count, shape);
      const rows = await sql.all<T & { version: number | string | null; total: number | string; shown?: number | string }>(query.text, query.params);
      const version = sql.dialect === 'postgres' ? String(rows[0]?.version ?? 0) : before!;
      // A count known for another version than the one the statement read: the page was placed with a stale count.
      if (count.kind === 'known' && version !== before && attempt === 1) {
        count = { kind: 'counted' };
        continue;
      }
      // The page before a cursor that lies within the first page is that first page, whole.
      const shown = Number(rows[0]?.shown ?? 0);
      if ('before' in start && shape === 'json' && limit !== undefined && shown < limit && attempt === 1) {
        start = { offset: 0 };
        continue;
      }
      const total = Number(rows[0]?.total ?? 0);
      if (!plan.keptCount) this.#counts.set(plan.countKey, version, total);
      this.#estimates.set(plan.countKey, '', total);
      return { rows, version, start };
    }
  }

  /** Whether a page `offset` rows deep is nearer the list's end than its start (so read from the end). */
  async #nearerEnd(plan: ListingPlan, offset: number, limit: number, count: CountSource): Promise<boolean> {
    let total = count.kind === 'known' ? count.total : this.#estimates.get(plan.countKey, '');
    if (total === undefined) {
      const query = plan.count();
      total = Number((await this.sql.one<{ total: number }>(query.text, query.params))?.total ?? 0);
      this.#estimates.set(plan.countKey, '', total);
    }
    return total - offset - limit < offset;
  }
}
