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
import { ListCache } from './list-cache.js';
import { FreshRead } from '../store/fresh-read.js';

/** The event of a new post (spec 002, Part B "Webhook"): its payload's data is the post. */
export const POST_CREATED = 'post.created';

export interface Post {
  id: number;
  title: string;
  content: string;
  author: string;
  created_at: string;
  updated_at: string;
  tags: string[];
  is_published: boolean;
}

export interface PostFilter {
  search?: string | undefined;
  author?: string | undefined;
  /** Any of these tags (OR). */
  tags?: string[] | undefined;
  is_published?: boolean | undefined;
  created_after?: string | undefined;
  created_before?: string | undefined;
}

export type PostSort = 'created_at' | '-created_at' | 'title' | '-title';

export interface ListOptions {
  sort?: PostSort;
  limit?: number;
  offset?: number;
  /** The posts' version the caller read before; read here otherwise. */
  version?: string;
}

/** A post as the API answers it, written by SQLite: the keys of Post in its order, tags and is_published as JSON. */
const POST_JSON =
  "json_object('id', id, 'title', title, 'content', content, 'author', author, 'created_at', created_at, 'updated_at', updated_at, " +
  "'tags', json(tags), 'is_published', json(CASE WHEN is_published THEN 'true' ELSE 'false' END))";

/** Runs inside the transaction that writes a post: whatever it writes through `tx` commits with the post, or not at all. */
export type InTransaction<T> = (value: T, tx: Sql) => Promise<void> | void;

interface Row {
  id: number;
  title: string;
  content: string;
  author: string;
  author_id: number | null;
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
    created_at: row.created_at,
    updated_at: row.updated_at,
    tags: JSON.parse(row.tags) as string[],
    is_published: row.is_published === true || row.is_published === 1,
  };
}

/** Tags as given, trimmed, without empties or case-insensitive duplicates. */
export function cleanTags(tags: readonly string[]): string[] {
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

// ---- where the dialects differ: case-insensitive matching and ordering

/**
 * SQLite's LIKE and NOCASE fold ASCII only; PostgreSQL's ILIKE and lower()
 * fold every letter. Titles sort by code point on both, whatever the
 * PostgreSQL database's collation (the index on it: schema version 2).
 */
function caseless(sql: Sql) {
  return sql.dialect === 'postgres'
    ? { like: 'ILIKE', equals: (column: string, param: string) => `lower(${column}) = lower(${param})`, title: '(lower(title) COLLATE "C")' }
    : { like: 'LIKE', equals: (column: string, param: string) => `${column} = ${param} COLLATE NOCASE`, title: 'title COLLATE NOCASE' };
}

/** The expression a sort orders by before the id, and its direction. */
function sortKey(sql: Sql, sort: PostSort): { expression: string; descending: boolean } {
  const descending = sort.startsWith('-');
  return { expression: sort.endsWith('title') ? caseless(sql).title : 'created_at', descending };
}

function orderOf(sql: Sql, sort: PostSort): string {
  const { expression, descending } = sortKey(sql, sort);
  const direction = descending ? 'DESC' : 'ASC';
  return `${expression} ${direction}, id ${direction}`;
}

/**
 * Deep pages seek instead of skipping: every MARK_STEP-th row of a filter's
 * order is remembered (its sort key and id) under the posts' version, so
 * that page N starts at the nearest mark before it, through the sort's
 * index, and skips fewer than MARK_STEP rows, however deep the page. The
 * marks come from one scan of the filter's keys, which also gives the
 * filter's count; any write makes them stale, as it does the count.
 */
const MARK_STEP = 100;

interface Mark {
  key: string;
  id: number | string;
}

/** `(post, tag), ...` rows for one post's tags, lowercased: the filter compares lowercased values. */
function tagRows(postId: number, tags: readonly string[]): { text: string; params: Param[] } {
  const params: Param[] = [postId, ...tags.map((tag) => tag.toLowerCase())];
  const values = tags.map((_, i) => `($1, $${i + 2})`).join(', ');
  return { text: `INSERT INTO post_tags (post_id, tag) VALUES ${values} ON CONFLICT DO NOTHING`, params };
}

export class PostStore {
  /** SQLite: writes through this store; with data_version (commits by other connections) it says whether lists changed. */
  #writes = 0;
  readonly #counts = new ListCache<number>(256);
  /** PostgreSQL: the 'posts' counter, one read shared by the requests that ask at the same time (never one started before they asked). */
  readonly #sharedVersion = new FreshRead(async () => {
    const row = await this.sql.one<{ value: number }>("SELECT value FROM counters WHERE name = 'posts'");
    return String(row?.value ?? 0);
  });
  readonly #marks = new ListCache<Mark[]>(64);

  constructor(
    private readonly sql: Sql,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Changes whenever the posts may have changed. Caches of list answers are
   * keyed on it, and read it before the data, so an entry never holds data
   * older than its version. PostgreSQL: the 'posts' counter, bumped in every
   * transaction that writes posts, on any instance: a write acknowledged
   * anywhere has changed it. SQLite: the writes through this store and the
   * commits of other connections to the file.
   */
  async version(): Promise<string> {
    if (this.sql.dialect === 'postgres') return this.#sharedVersion.get();
    const row = await this.sql.one<{ data_version: number }>('PRAGMA data_version');
    return `${this.#writes}:${row?.data_version ?? 0}`;
  }

  /** Marks the posts changed, inside the transaction that changes them. */
  async #changed(tx: Sql): Promise<void> {
    if (tx.dialect === 'postgres') await tx.run("UPDATE counters SET value = value + 1 WHERE name = 'posts'");
    // Counted before the commit: a list read meanwhile waits for the commit (one SQLite connection), and a
    // rolled-back write only costs a recomputation.
    else this.#writes++;
  }

  /** Writes a post; `inTransaction` runs in the same transaction (the webhook deliveries of a published post). */
  async create(
    input: { title: string; content: string; tags: string[]; authorId: number | null; author: string; isPublished?: boolean },
    inTransaction?: InTransaction<Post>,
  ): Promise<Post> {
    const tags = cleanTags(input.tags);
    const at = this.now().toISOString();
    const published = input.isPublished !== false;
    return this.sql.transaction(async (tx) => {
      const row = (await tx.one<Row>(
        `INSERT INTO posts (title, content, author_id, author, tags, is_published, created_at, updated_at, published_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) RETURNING *`,
        [input.title, input.content, input.authorId, input.author, JSON.stringify(tags), published, at, published ? at : null],
      ))!;
      if (tags.length > 0) {
        const insert = tagRows(row.id, tags);
        await tx.run(insert.text, insert.params);
      }
      await this.#changed(tx);
      const post = toPost(row);
      await inTransaction?.(post, tx);
      return post;
    });
  }

  async get(id: number): Promise<(Post & { authorId: number | null; firstPublished: boolean }) | undefined> {
    const row = await this.sql.one<Row>('SELECT * FROM posts WHERE id = $1', [id]);
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
    return this.sql.transaction(async (tx) => {
      // PostgreSQL: the row stays locked until the commit, so two updates that publish the same draft
      // cannot both see it unpublished (SQLite's write transaction already excludes the other).
      const current = await tx.one<Row>(`SELECT * FROM posts WHERE id = $1${tx.dialect === 'postgres' ? ' FOR UPDATE' : ''}`, [id]);
      if (!current) return undefined;
      const at = this.now().toISOString();
      const firstPublication = changes.is_published === true && current.published_at === null;
      const tags = changes.tags === undefined ? undefined : cleanTags(changes.tags);
      const row = (await tx.one<Row>(
        `UPDATE posts SET title = $2, content = $3, tags = $4, is_published = $5,
           updated_at = $6, published_at = COALESCE(published_at, $7) WHERE id = $1 RETURNING *`,
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
          const insert = tagRows(id, tags);
          await tx.run(insert.text, insert.params);
        }
      }
      await this.#changed(tx);
      const result = { post: toPost(row), firstPublication };
      await inTransaction?.(result, tx);
      return result;
    });
  }

  /** Filtered posts (AND between filters, OR between tags), one page, and the total. */
  async list(filter: PostFilter, options: ListOptions = {}): Promise<{ posts: Post[]; total: number }> {
    const { select, params, total } = await this.#select(filter, options);
    const rows = await this.sql.all<Row>(select('*'), params);
    return { posts: rows.map(toPost), total };
  }

  /**
   * The same page as `list`, as the UTF-8 bytes of its posts' JSON (what
   * Buffer.from(JSON.stringify(list(...).posts)) gives, byte for byte).
   * On SQLite the database writes the whole array (json_object per post,
   * joined in the page's order) and hands it over as one BLOB: no text
   * crosses into JavaScript, where turning twenty posts of UTF-8 into
   * strings and back into bytes for the socket cost more than the query.
   * test/blog/posts.test.ts holds the two to the same bytes.
   */
  async listJson(filter: PostFilter, options: ListOptions = {}): Promise<{ json: Buffer; total: number }> {
    if (this.sql.dialect !== 'sqlite') {
      const { posts, total } = await this.list(filter, options);
      return { json: Buffer.from(JSON.stringify(posts)), total };
    }
    const { select, order, params, total } = await this.#select(filter, options);
    // group_concat's own ORDER BY (the page's order, over the page's columns): without it the order it joins in is arbitrary.
    const row = await this.sql.one<{ json: Buffer }>(
      `SELECT CAST('[' || coalesce(group_concat(post, ',' ORDER BY ${order}), '') || ']' AS BLOB) AS json ` +
        `FROM (${select(`${POST_JSON} AS post, id, created_at, title`)})`,
      params,
    );
    // Text written with a lone surrogate is stored as its WTF-8 bytes, which are not UTF-8: those pages are decoded
    // as list() decodes them (each invalid sequence a U+FFFD) and encoded again, so that no client meets invalid UTF-8.
    const json = row!.json;
    return { json: isUtf8(json) ? json : Buffer.from(json.toString('utf8')), total };
  }

  /** The page's statement (given what to select), its order, its parameters, and the filter's count. */
  async #select(
    filter: PostFilter,
    options: ListOptions,
  ): Promise<{ select: (columns: string) => string; order: string; params: Param[]; total: number }> {
    // Read before the data (the caller may have just done so): the count cached below must not be older than
    // the version it is kept under.
    const version = options.version ?? (await this.version());
    const { sql } = this;
    const match = caseless(sql);
    const where: string[] = [];
    const params: Param[] = [];
    const param = (value: Param) => {
      params.push(value);
      return `$${params.length}`;
    };
    const escapeLike = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    if (filter.search?.trim()) {
      const search = param(escapeLike(filter.search.trim()));
      where.push(`(title ${match.like} ${search} ESCAPE '\\' OR content ${match.like} ${search} ESCAPE '\\')`);
    }
    if (filter.author?.trim()) where.push(match.equals('author', param(filter.author.trim())));
    const tags = cleanTags(filter.tags ?? []);
    if (tags.length > 0) {
      where.push(`id IN (SELECT post_id FROM post_tags WHERE tag IN (${tags.map((tag) => param(tag.toLowerCase())).join(', ')}))`);
    }
    if (filter.is_published !== undefined) where.push(`is_published = ${param(filter.is_published)}`);
    if (filter.created_after) where.push(`created_at >= ${param(filter.created_after)}`);
    if (filter.created_before) where.push(`created_at < ${param(filter.created_before)}`);
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    // The count is the costly part (it reads every matching row) and is the same for every page of a filter.
    const countKey = `${clause}|${JSON.stringify(params)}`;
    const sort = options.sort ?? '-created_at';
    const offset = Math.floor(options.offset ?? 0);
    let total = this.#counts.get(countKey, version);
    let start: { after?: Mark; skip: number } = { skip: offset };
    if (options.limit !== undefined && offset >= MARK_STEP) {
      const marksKey = `${sort}|${countKey}`;
      let marks = this.#marks.get(marksKey, version);
      if (marks === undefined) {
        const keys = await sql.all<Mark>(`SELECT ${sortKey(sql, sort).expression} AS key, id FROM posts ${clause} ORDER BY ${orderOf(sql, sort)}`, params);
        marks = [];
        for (let i = MARK_STEP - 1; i < keys.length; i += MARK_STEP) marks.push(keys[i]!);
        this.#marks.set(marksKey, version, marks);
        total = keys.length;
        this.#counts.set(countKey, version, total);
      }
      const passed = Math.min(Math.floor(offset / MARK_STEP), marks.length);
      if (passed > 0) start = { after: marks[passed - 1], skip: offset - passed * MARK_STEP };
    }
    if (total === undefined) {
      total = Number((await sql.one<{ n: number }>(`SELECT count(*) AS n FROM posts ${clause}`, params))!.n);
      this.#counts.set(countKey, version, total);
    }
    let filtered = clause;
    if (start.after) {
      const { expression, descending } = sortKey(sql, sort);
      const seek = `(${expression}, id) ${descending ? '<' : '>'} (${param(start.after.key)}, ${param(start.after.id)})`;
      filtered = clause ? `${clause} AND ${seek}` : `WHERE ${seek}`;
    }
    // Limit and offset as parameters: one statement per filter shape, not one per page. On SQLite the limit is an
    // expression, not a bare parameter: SQLite plans with a bare LIMIT parameter's value, so binding it expires the
    // statement and every run would prepare it again (sqlite3ExprIsInteger's varmask; a third of a page's cost).
    const limit = options.limit === undefined ? '' : param(Math.floor(options.limit));
    const page = options.limit === undefined ? '' : ` LIMIT ${sql.dialect === 'sqlite' ? `CAST(${limit} AS INTEGER)` : limit} OFFSET ${param(start.skip)}`;
    const order = orderOf(sql, sort);
    return { select: (columns) => `SELECT ${columns} FROM posts ${filtered} ORDER BY ${order}${page}`, order, params, total };
  }
}
