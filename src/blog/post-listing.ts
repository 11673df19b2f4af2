/**
 * The statement of one page of posts, on either engine, at a cost that does
 * not grow with the number of posts (issue 22): the page, its count and
 * where it lies, in one statement.
 *
 * How a page is found:
 * - From a cursor (next and previous carry one: the sort key and id of the
 *   page's last or first row): a seek through the sort's index, `(key, id)
 *   < (k, i)`, then the page's rows. Walking a list costs a page each,
 *   however deep, and a write between two pages neither repeats a post nor
 *   skips one.
 * - By number (page N, an offset): from whichever end is nearer. The last
 *   page is the first rows of the list read backwards, so pages near either
 *   end cost a page; one in the middle of a long list skips through the
 *   index only (PostgreSQL seeks past the skipped keys without reading
 *   their rows).
 * - A single tag in date order is a range of post_tags' listing index
 *   (tag, is_published, created_at, post_id), from either end; several tags
 *   or a tag sorted by title read the tag's posts and sort them.
 *
 * The count: for a list's usual filters (published or not, with or without
 * one tag) a kept count (counters, tag_counts: see
 * store/blog-listing-schema.ts), read in the same statement; for a search,
 * an author, dates or several tags, counted, unless the caller knows it
 * for this version of the posts.
 *
 * The page's JSON is the bytes of what JSON.stringify gives for the same
 * posts, written by the database in one value: by SQLite with json_object
 * (the array in one BLOB, so that no post crosses into JavaScript as text),
 * by PostgreSQL from each post's JSON, which it keeps (posts.answer_json,
 * written by a trigger with to_json when the post is written), joined in
 * one text. A row per post, its JSON written by serve, cost serve about
 * 0.13 ms a page of twenty 600-byte posts in decoding, JSON.stringify and
 * garbage; the JSON written afresh at each page cost PostgreSQL about
 * 0.1 ms more than the stored one.
 */
import { containsPattern, type Dialect, type Param } from '../store/sql.js';

export interface PostFilter {
  search?: string | undefined;
  author?: string | undefined;
  /** Posts of this account only (by id, whatever its name: a list of the caller's drafts). */
  author_id?: number | undefined;
  /** Posts of the admin token (true) or of accounts (false) only. */
  author_is_admin?: boolean | undefined;
  /** Any of these tags (OR). */
  tags?: string[] | undefined;
  is_published?: boolean | undefined;
  created_after?: string | undefined;
  created_before?: string | undefined;
}

export type PostSort = 'created_at' | '-created_at' | 'title' | '-title';

/** A row's place in a sort: its sort key and id. */
export interface PageCursor {
  key: string;
  id: number;
}

export type PageStart = { offset: number; fromEnd?: boolean } | { after: PageCursor } | { before: PageCursor };

/** How the page's count is had: a kept count, a count in the statement, or one the caller knows. */
export type CountSource = { kind: 'kept' } | { kind: 'counted' } | { kind: 'known'; total: number };

/** A post as the API answers it, written by SQLite: the keys of Post in its order, tags and is_published as JSON. */
const SQLITE_POST_JSON =
  "json_object('id', page.id, 'title', page.title, 'content', page.content, 'author', page.author, " +
  "'author_is_admin', json(CASE WHEN page.author_is_admin THEN 'true' ELSE 'false' END), 'created_at', page.created_at, " +
  "'updated_at', page.updated_at, 'tags', json(page.tags), 'is_published', json(CASE WHEN page.is_published THEN 'true' ELSE 'false' END))";

/**
 * The same, on PostgreSQL: written once, when the post is, by a trigger (posts.answer_json, migration 11 of
 * store/postgres-schema.ts: to_json escapes a string as JSON.stringify does, and the tags are stored as
 * JSON.stringify wrote them).
 */
const POSTGRES_POST_JSON = 'page.answer_json';

/** A post's own columns: what a row of the list, or of a post, carries (not PostgreSQL's answer_json). */
export const POST_COLUMNS = [
  'id',
  'title',
  'content',
  'author_id',
  'author',
  'author_is_admin',
  'tags',
  'is_published',
  'created_at',
  'updated_at',
  'published_at',
] as const;

/** Where the dialects differ in matching and ordering (see PostStore for why titles sort as they do). */
function caseless(dialect: Dialect) {
  return dialect === 'postgres'
    ? { like: 'ILIKE', equals: (column: string, param: string) => `lower(${column}) = lower(${param})`, title: '(lower(p.title) COLLATE "C")' }
    : { like: 'LIKE', equals: (column: string, param: string) => `${column} = ${param} COLLATE NOCASE`, title: 'p.title COLLATE NOCASE' };
}

interface PageQuery {
  text: string;
  params: Param[];
  /** The rows come back from the end of the list (they are put back in order by the statement). */
  fromEnd: boolean;
}

export interface ListingPlan {
  /** The count's key among a cache's entries: the filter, whatever the sort and page. */
  countKey: string;
  /** Whether the filter's count is kept by the database (a row read) rather than counted. */
  keptCount: boolean;
  /** The statement of a page, or (`rows`) of its posts as rows. */
  page(start: PageStart, limit: number | undefined, count: CountSource, shape: 'json' | 'rows'): PageQuery;
  /** The statement of the count alone (and the posts' version on PostgreSQL). */
  count(): { text: string; params: Param[] };
}

/** Tags as given, trimmed, lowercased, without empties or duplicates: what the filter compares. */
function filterTags(tags: readonly string[] | undefined): string[] {
  return [...new Set((tags ?? []).map((tag) => tag.trim().toLowerCase()).filter(Boolean))];
}

function planListing(dialect: Dialect, filter: PostFilter, sort: PostSort): ListingPlan {
  const postgres = dialect === 'postgres';
  const match = caseless(dialect);
  const descending = sort.startsWith('-');
  const byTitle = sort.endsWith('title');
  const tags = filterTags(filter.tags);
  // One tag, in date order, with is_published given: a range of post_tags' listing index.
  const tagged = tags.length === 1 && !byTitle && filter.is_published !== undefined;
  const key = tagged ? 't.created_at' : byTitle ? match.title : 'p.created_at';
  const id = tagged ? 't.post_id' : 'p.id';

  const base: Param[] = [];
  const param = (params: Param[], value: Param) => {
    params.push(value);
    return `$${params.length}`;
  };
  // Conditions on the tag's rows (the tag path) and on the posts; their parameters come first in every statement.
  const onTags: string[] = [];
  const onPosts: string[] = [];
  const bool = (value: boolean) => (postgres ? value : value ? 1 : 0);
  if (tagged) {
    onTags.push(`t.tag = ${param(base, tags[0]!)}`, `t.is_published = ${param(base, bool(filter.is_published!))}`);
    if (filter.created_after) onTags.push(`t.created_at >= ${param(base, filter.created_after)}`);
    if (filter.created_before) onTags.push(`t.created_at < ${param(base, filter.created_before)}`);
  } else {
    if (tags.length > 0) onPosts.push(`p.id IN (SELECT post_id FROM post_tags WHERE tag IN (${tags.map((tag) => param(base, tag)).join(', ')}))`);
    if (filter.is_published !== undefined) onPosts.push(`p.is_published = ${param(base, bool(filter.is_published))}`);
    if (filter.created_after) onPosts.push(`p.created_at >= ${param(base, filter.created_after)}`);
    if (filter.created_before) onPosts.push(`p.created_at < ${param(base, filter.created_before)}`);
  }
  if (filter.search?.trim()) {
    const search = param(base, containsPattern(filter.search.trim()));
    onPosts.push(`(p.title ${match.like} ${search} ESCAPE '\\' OR p.content ${match.like} ${search} ESCAPE '\\')`);
  }
  if (filter.author?.trim()) onPosts.push(match.equals('p.author', param(base, filter.author.trim())));
  if (filter.author_id !== undefined) onPosts.push(`p.author_id = ${param(base, filter.author_id)}`);
  if (filter.author_is_admin !== undefined) onPosts.push(`p.author_is_admin = ${param(base, bool(filter.author_is_admin))}`);

  // Rows of the list (posts joined when their columns are needed) and their conditions.
  const from = tagged ? 'post_tags t JOIN posts p ON p.id = t.post_id' : 'posts p';
  const where = (extra: string[] = []) => {
    const all = [...onTags, ...onPosts, ...extra];
    return all.length ? ` WHERE ${all.join(' AND ')}` : '';
  };
  // The keys alone: the tag's index when nothing is asked of the posts themselves.
  const keysFrom = tagged && onPosts.length === 0 ? 'post_tags t' : from;
  // The count, once per statement however often the page uses it (SQLite would otherwise compute it at each use).
  const total = '(SELECT total FROM c)';

  const kept =
    !filter.search?.trim() &&
    !filter.author?.trim() &&
    filter.author_is_admin === undefined &&
    filter.author_id === undefined &&
    !filter.created_after &&
    !filter.created_before &&
    tags.length <= 1;
  const keptCount = (params: Param[]): string => {
    const side = filter.is_published === undefined ? 'both' : filter.is_published ? 'published' : 'drafts';
    if (tags.length === 0) {
      if (side === 'both')
        return `(SELECT CAST(sum(value) AS ${postgres ? 'BIGINT' : 'INTEGER'}) FROM counters WHERE name IN ('posts.published', 'posts.drafts'))`;
      return `(SELECT value FROM counters WHERE name = 'posts.${side}')`;
    }
    const tag = param(params, tags[0]!);
    const column = side === 'both' ? 'published + drafts' : side;
    return `coalesce((SELECT ${column} FROM tag_counts WHERE tag = ${tag}), 0)`;
  };
  const countOf = (params: Param[], count: CountSource): string => {
    if (count.kind === 'known') return `CAST(${param(params, count.total)} AS ${postgres ? 'BIGINT' : 'INTEGER'})`;
    if (count.kind === 'kept' && kept) return keptCount(params);
    return `(SELECT count(*) FROM ${from}${where()})`;
  };

  const direction = (reverse: boolean) => (descending !== reverse ? 'DESC' : 'ASC');
  const order = (reverse: boolean, k = key, i = id) => `${k} ${direction(reverse)}, ${i} ${direction(reverse)}`;
  /** `(key, id)` before (reverse) or after a cursor in the list's order. */
  const beyond = (reverse: boolean, cursor: string) => `(${key}, ${id}) ${descending !== reverse ? '<' : '>'} ${cursor}`;
  const integer = (expression: string) => (postgres ? expression : `CAST(${expression} AS INTEGER)`);
  const greatest = postgres ? 'GREATEST' : 'max';
  const least = postgres ? 'LEAST' : 'min';

  /** The page's rows as `SELECT <columns>, key AS k, id AS i ...`, in the list's order or from its end. */
  const pageRows = (params: Param[], start: PageStart, limit: number | undefined, shape: 'json' | 'rows'): { sql: string; fromEnd: boolean } => {
    // A JSON page on PostgreSQL needs each post's stored JSON alone; SQLite writes it from the columns.
    const post = postgres && shape === 'json' ? 'p.answer_json' : POST_COLUMNS.map((column) => `p.${column}`).join(', ');
    const columns = `${post}, ${key} AS k, ${id} AS i`;
    const limitClause = (expression: string | undefined) => (expression === undefined ? (postgres ? '' : ' LIMIT -1') : ` LIMIT ${integer(expression)}`);
    // PostgreSQL: the page size written into the text (a handful of sizes, each its own prepared statement). As a
    // parameter it made the generic plan guess the limit, so every call was planned again, at more than the cost
    // of running the statement (0.16 ms against 0.10 ms for page 1, pg_stat_statements with track_planning).
    const n = limit === undefined ? undefined : postgres && Number.isSafeInteger(limit) && limit >= 0 ? String(limit) : param(params, limit);
    if ('after' in start || 'before' in start) {
      const reverse = 'before' in start;
      const cursor = reverse ? start.before : start.after;
      const at = `(${param(params, cursor.key)}, ${param(params, cursor.id)})`;
      return { sql: `SELECT ${columns} FROM ${from}${where([beyond(reverse, at)])} ORDER BY ${order(reverse)}${limitClause(n)}`, fromEnd: reverse };
    }
    const offset = Math.max(0, Math.floor(start.offset));
    if (start.fromEnd && n !== undefined) {
      // Rows [offset, offset + n) of c are rows [c - offset - n, c - offset) read backwards.
      const o = param(params, offset);
      const take = `${greatest}(0, ${least}(${n}, ${total} - ${o}))`;
      const skip = `${greatest}(0, ${total} - ${o} - ${n})`;
      return { sql: skipped(columns, true, skip, take), fromEnd: true };
    }
    if (offset === 0) return { sql: `SELECT ${columns} FROM ${from}${where()} ORDER BY ${order(false)}${limitClause(n)}`, fromEnd: false };
    return { sql: skipped(columns, false, param(params, offset), n), fromEnd: false };

    function skipped(selected: string, reverse: boolean, skip: string, take: string | undefined): string {
      // The first row's place, found through the index alone (the rows skipped are never read), then the page from it.
      const first = `(SELECT ${key}, ${id} FROM ${keysFrom}${where()} ORDER BY ${order(reverse)} LIMIT 1 OFFSET ${integer(skip)})`;
      const from_ = `(${key}, ${id}) ${descending !== reverse ? '<=' : '>='} ${first}`;
      return `SELECT ${selected} FROM ${from}${where([from_])} ORDER BY ${order(reverse)}${limitClause(take)}`;
    }
  };

  return {
    countKey: `${tags.join(',')}|${where()}|${JSON.stringify(base)}`,
    keptCount: kept,
    count() {
      // Only what the statement uses: PostgreSQL refuses a parameter that it does not mention.
      const params = kept ? [] : [...base];
      const total = countOf(params, { kind: 'kept' });
      const version = postgres ? ", (SELECT value FROM counters WHERE name = 'posts') AS version" : '';
      return { text: `SELECT ${total} AS total${version}`, params };
    },
    page(start, limit, count, shape) {
      const params = [...base];
      const totalOf = countOf(params, count);
      const counted = `c AS MATERIALIZED (SELECT ${totalOf} AS total)`;
      const rows = pageRows(params, start, limit, shape);
      const inOrder = order(false, 'page.k', 'page.i');
      const version = postgres ? "(SELECT value FROM counters WHERE name = 'posts')" : 'NULL';
      if (shape === 'rows') {
        // One row even for an empty page, for the count.
        return {
          text: `WITH ${counted}, page AS (${rows.sql}) SELECT c.total, ${version} AS version, page.* FROM c LEFT JOIN page ON ${postgres ? 'TRUE' : '1'} ORDER BY ${inOrder}`,
          params,
          fromEnd: rows.fromEnd,
        };
      }
      const end = (reverse: boolean, column: 'k' | 'i') => `(SELECT ${column} FROM page ORDER BY ${order(reverse, 'k', 'i')} LIMIT 1)`;
      const cursorStart = 'after' in start || 'before' in start;
      // Whether rows lie before the page's first row and after its last: what a cursor's page needs for its links.
      const around = cursorStart
        ? `, EXISTS (SELECT 1 FROM ${from}${where([beyond(true, `(${end(false, 'k')}, ${end(false, 'i')})`)])}) AS more_before` +
          `, EXISTS (SELECT 1 FROM ${from}${where([beyond(false, `(${end(true, 'k')}, ${end(true, 'i')})`)])}) AS more_after`
        : '';
      if (postgres) {
        // The page in one row, as SQLite's: the array as one text (to_json escapes each string as JSON.stringify
        // does), the number of posts and the places of the first and the last. PostgreSQL takes the rows in the
        // order the page yields them, so the aggregates sort nothing.
        const ordered = `ORDER BY ${inOrder}`;
        const keys = `array_agg(page.k ${ordered})`;
        const ids = `array_agg(page.i ${ordered})`;
        const aggregated =
          `SELECT '[' || coalesce(string_agg(${POSTGRES_POST_JSON}, ',' ${ordered}), '') || ']' AS json, count(*) AS shown, ` +
          `(${keys})[1] AS first_key, (${ids})[1] AS first_id, (${keys})[count(*)] AS last_key, (${ids})[count(*)] AS last_id FROM (${rows.sql}) page`;
        // The row next to each end, sought through the list's index (a scalar subquery keeps its ORDER BY; PostgreSQL
        // drops it from an EXISTS, whose generic plan then looked for any row beyond the end by a scan of the posts:
        // 0.6 ms at 2,000 posts, as long as it took to meet such a row: up to every post).
        const next = (reverse: boolean, end: 'first' | 'last') =>
          `(SELECT TRUE FROM ${from}${where([beyond(reverse, `(a.${end}_key, a.${end}_id)`)])} ORDER BY ${order(reverse)} LIMIT 1) IS NOT NULL`;
        const beside = cursorStart ? `, ${next(true, 'first')} AS more_before, ${next(false, 'last')} AS more_after` : '';
        // c is read once on most pages (PostgreSQL then inlines it) and kept when the page reads it too (from the end).
        return {
          text: `WITH c AS (SELECT ${totalOf} AS total) SELECT ${version} AS version, ${total} AS total, a.*${beside} FROM (${aggregated}) a`,
          params,
          fromEnd: rows.fromEnd,
        };
      }
      // SQLite writes the whole array in one BLOB: no post crosses into JavaScript as text.
      if (!cursorStart) {
        // One pass over the page, read once: the array, and the places of its posts in order (JavaScript takes the
        // first and the last). A page read several times (a MATERIALIZED page and a subquery per end) cost SQLite
        // three times the page itself.
        // Read forwards, the page comes in its order already: a subquery with a LIMIT is never flattened into an
        // aggregate over it, so the aggregates take its rows as it yields them (test/blog/posts.test.ts holds the
        // bytes to list()'s). An ORDER BY in each aggregate cost two sorts, a quarter of the statement. Read from
        // the end, the rows come reversed and the aggregates put them in order.
        const ordered = rows.fromEnd ? ` ORDER BY ${inOrder}` : '';
        return {
          text:
            `WITH c AS (SELECT ${countOf(params, count)} AS total) SELECT NULL AS version, ${total} AS total, ` +
            `CAST('[' || coalesce(group_concat(${SQLITE_POST_JSON}, ','${ordered}), '') || ']' AS BLOB) AS json, ` +
            `count(*) AS shown, json_group_array(json_array(page.k, page.i)${ordered}) AS places FROM (${rows.sql}) page`,
          params,
          fromEnd: rows.fromEnd,
        };
      }
      const json = `(SELECT CAST('[' || coalesce(group_concat(${SQLITE_POST_JSON}, ',' ORDER BY ${inOrder}), '') || ']' AS BLOB) FROM page)`;
      return {
        text:
          `WITH ${counted}, page AS MATERIALIZED (${rows.sql}) SELECT ${version} AS version, ${total} AS total, ${json} AS json, ` +
          `(SELECT count(*) FROM page) AS shown, ${end(false, 'k')} AS first_key, ${end(false, 'i')} AS first_id, ` +
          `${end(true, 'k')} AS last_key, ${end(true, 'i')} AS last_id${around}`,
        params,
        fromEnd: rows.fromEnd,
      };
    },
  };
}

/** Plans kept, and statements kept in each: enough for the lists a site serves, bounded whatever clients ask for. */
const KEPT_PLANS = 256;
const KEPT_PAGES = 32;

/**
 * planListing, remembered: a plan depends on the dialect, the filter and the
 * sort alone, and a page's statement (its text and parameters) on the plan
 * and the page's start, limit, count and shape alone, so the same list asked
 * for again reuses both instead of writing a kilobyte of SQL afresh (and
 * hashing it again to find its prepared statement). Pages by number are kept;
 * a cursor's page (a key of its own) is written each time.
 */
export class ListingPlans {
  readonly #plans = new Map<string, { plan: ListingPlan; pages: Map<string, PageQuery> }>();

  constructor(private readonly dialect: Dialect) {}

  plan(filter: PostFilter, sort: PostSort): ListingPlan {
    const key = `${sort}\n${JSON.stringify(filter)}`;
    let kept = this.#plans.get(key);
    if (kept === undefined) {
      kept = { plan: planListing(this.dialect, filter, sort), pages: new Map() };
      if (this.#plans.size >= KEPT_PLANS) this.#plans.delete(this.#plans.keys().next().value!);
    } else {
      // Kept in the order of use, the least recently used first out: a burst of readers' own lists (drafts,
      // searches) passes through without pushing out the list everyone reads.
      this.#plans.delete(key);
    }
    this.#plans.set(key, kept);
    const { plan, pages } = kept;
    return {
      countKey: plan.countKey,
      keptCount: plan.keptCount,
      count: () => plan.count(),
      page(start, limit, count, shape) {
        if (!('offset' in start)) return plan.page(start, limit, count, shape);
        const pageKey = `${start.offset} ${start.fromEnd === true} ${limit} ${count.kind} ${count.kind === 'known' ? count.total : ''} ${shape}`;
        let query = pages.get(pageKey);
        if (query === undefined) {
          query = plan.page(start, limit, count, shape);
          pages.set(pageKey, query);
          if (pages.size > KEPT_PAGES) pages.delete(pages.keys().next().value!);
        }
        // The parameters are the caller's to keep: a copy.
        return { text: query.text, params: [...query.params], fromEnd: query.fromEnd };
      },
    };
  }
}

// ---- cursors as the API carries them

const SORTS: readonly PostSort[] = ['created_at', '-created_at', 'title', '-title'];
/** A cursor's key is a sort key: a date, or a title (at most 200 characters, lowercased on PostgreSQL). */
const MAX_CURSOR_KEY = 1_000;

/** A cursor as the links carry it: base64url of [sort, key, id]. */
export function encodeCursor(sort: PostSort, cursor: PageCursor): string {
  return Buffer.from(JSON.stringify([sort, cursor.key, cursor.id])).toString('base64url');
}

/** The cursor of a link, for `sort`; undefined (with why) when it is not one this server gave for this sort. */
export function decodeCursor(text: string, sort: PostSort): PageCursor | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    value = undefined;
  }
  if (!Array.isArray(value) || value.length !== 3) return { problem: 'is not a cursor of this server: follow the next and previous links as given' };
  const [cursorSort, key, id] = value as unknown[];
  if (
    typeof cursorSort !== 'string' ||
    !SORTS.includes(cursorSort as PostSort) ||
    typeof key !== 'string' ||
    key.length > MAX_CURSOR_KEY ||
    !Number.isSafeInteger(id) ||
    (id as number) < 1
  ) {
    return { problem: 'is not a cursor of this server: follow the next and previous links as given' };
  }
  if (cursorSort !== sort) return { problem: `belongs to a list sorted by ${cursorSort}, not ${sort}: follow the links of this list, or leave the cursor out` };
  return { key, id: id as number };
}
