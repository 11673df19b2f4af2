/**
 * Blog posts in SQLite. Tags live twice: as a JSON array on the post (the
 * order the author gave) and in post_tags (for the OR filter, indexed).
 */
import type { Db } from '../store/database.js';
import { ListCache } from './list-cache.js';

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

interface Row {
  id: number;
  title: string;
  content: string;
  author: string;
  author_id: number | null;
  tags: string;
  is_published: number;
  created_at: string;
  updated_at: string;
  published_at: string | null;
}

function toPost(row: Row): Post {
  return {
    id: row.id,
    title: row.title,
    content: row.content,
    author: row.author,
    created_at: row.created_at,
    updated_at: row.updated_at,
    tags: JSON.parse(row.tags) as string[],
    is_published: row.is_published === 1,
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

const ORDER: Record<PostSort, string> = {
  created_at: 'created_at ASC, id ASC',
  '-created_at': 'created_at DESC, id DESC',
  title: 'title COLLATE NOCASE ASC, id ASC',
  '-title': 'title COLLATE NOCASE DESC, id DESC',
};

export class PostStore {
  /** Writes through this store; with SQLite's data_version (writes by other connections) it says whether lists changed. */
  #writes = 0;
  readonly #counts = new ListCache<number>(256);
  readonly #insert;
  readonly #insertTag;
  readonly #deleteTags;
  readonly #byId;

  constructor(
    private readonly db: Db,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.#insert = db.prepare(
      `INSERT INTO posts (title, content, author_id, author, tags, is_published, created_at, updated_at, published_at)
       VALUES (@title, @content, @authorId, @author, @tags, @published, @at, @at, @publishedAt) RETURNING *`,
    );
    this.#insertTag = db.prepare('INSERT OR IGNORE INTO post_tags (post_id, tag) VALUES (?, ?)');
    this.#deleteTags = db.prepare('DELETE FROM post_tags WHERE post_id = ?');
    this.#byId = db.prepare('SELECT * FROM posts WHERE id = ?');
  }

  /**
   * Changes whenever the posts may have changed: a write through this store,
   * or a commit by another connection to the same database file. Caches of
   * list answers are keyed on it.
   */
  version(): string {
    return `${this.#writes}:${this.db.pragma('data_version', { simple: true }) as number}`;
  }

  /** Runs `work` in one transaction with the post writes it makes (and whatever else it writes to this database). */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  create(input: { title: string; content: string; tags: string[]; authorId: number | null; author: string; isPublished?: boolean }): Post {
    const tags = cleanTags(input.tags);
    const at = this.now().toISOString();
    const published = input.isPublished !== false;
    return this.db.transaction(() => {
      const row = this.#insert.get({
        title: input.title,
        content: input.content,
        authorId: input.authorId,
        author: input.author,
        tags: JSON.stringify(tags),
        published: published ? 1 : 0,
        at,
        publishedAt: published ? at : null,
      }) as Row;
      for (const tag of tags) this.#insertTag.run(row.id, tag);
      this.#writes++;
      return toPost(row);
    })();
  }

  get(id: number): (Post & { authorId: number | null; firstPublished: boolean }) | undefined {
    const row = this.#byId.get(id) as Row | undefined;
    return row ? { ...toPost(row), authorId: row.author_id, firstPublished: row.published_at !== null } : undefined;
  }

  /**
   * Applies the given fields; says whether this update published the post
   * for the first time (which is when the webhook fires).
   */
  update(id: number, changes: { title?: string; content?: string; tags?: string[]; is_published?: boolean }): { post: Post; firstPublication: boolean } | undefined {
    return this.db.transaction(() => {
      const current = this.#byId.get(id) as Row | undefined;
      if (!current) return undefined;
      const at = this.now().toISOString();
      const firstPublication = changes.is_published === true && current.published_at === null;
      const tags = changes.tags === undefined ? undefined : cleanTags(changes.tags);
      const row = this.db
        .prepare(
          `UPDATE posts SET title = @title, content = @content, tags = @tags, is_published = @published,
             updated_at = @at, published_at = COALESCE(published_at, @publishedAt) WHERE id = @id RETURNING *`,
        )
        .get({
          id,
          title: changes.title ?? current.title,
          content: changes.content ?? current.content,
          tags: tags === undefined ? current.tags : JSON.stringify(tags),
          published: changes.is_published === undefined ? current.is_published : changes.is_published ? 1 : 0,
          at,
          publishedAt: changes.is_published ? at : null,
        }) as Row;
      if (tags !== undefined) {
        this.#deleteTags.run(id);
        for (const tag of tags) this.#insertTag.run(id, tag);
      }
      this.#writes++;
      return { post: toPost(row), firstPublication };
    })();
  }

  /** Filtered posts (AND between filters, OR between tags), one page, and the total. */
  list(filter: PostFilter, options: { sort?: PostSort; limit?: number; offset?: number } = {}): { posts: Post[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    const escapeLike = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    if (filter.search?.trim()) {
      where.push(`(title LIKE @search ESCAPE '\\' OR content LIKE @search ESCAPE '\\')`);
      params.search = escapeLike(filter.search.trim());
    }
    if (filter.author?.trim()) {
      where.push('author = @author COLLATE NOCASE');
      params.author = filter.author.trim();
    }
    const tags = cleanTags(filter.tags ?? []);
    if (tags.length > 0) {
      where.push(`id IN (SELECT post_id FROM post_tags WHERE tag IN (${tags.map((_, i) => `@tag${i}`).join(', ')}))`);
      tags.forEach((tag, i) => (params[`tag${i}`] = tag));
    }
    if (filter.is_published !== undefined) {
      where.push('is_published = @published');
      params.published = filter.is_published ? 1 : 0;
    }
    if (filter.created_after) {
      where.push('created_at >= @after');
      params.after = filter.created_after;
    }
    if (filter.created_before) {
      where.push('created_at < @before');
      params.before = filter.created_before;
    }
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    // The count is the costly part (it reads every matching row) and is the same for every page of a filter.
    const countKey = `${clause}|${JSON.stringify(params)}`;
    const version = this.version();
    let total = this.#counts.get(countKey, version);
    if (total === undefined) {
      total = (this.db.prepare(`SELECT count(*) AS n FROM posts ${clause}`).get(params) as { n: number }).n;
      this.#counts.set(countKey, version, total);
    }
    const page = options.limit === undefined ? '' : ` LIMIT ${Math.floor(options.limit)} OFFSET ${Math.floor(options.offset ?? 0)}`;
    const rows = this.db.prepare(`SELECT * FROM posts ${clause} ORDER BY ${ORDER[options.sort ?? '-created_at']}${page}`).all(params) as Row[];
    return { posts: rows.map(toPost), total };
  }
}
