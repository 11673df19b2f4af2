/**
 * What keeps the cost of a post list flat however many posts there are
 * (issue 22): SQLite migration 11 and PostgreSQL migration 7.
 *
 * - **Counts kept, not counted.** The number of published posts and of
 *   drafts (rows of `counters`) and the same per tag (`tag_counts`) are kept
 *   by triggers, so that every writer keeps them right: serve, `db copy`, a
 *   bulk load in SQL. A list's `count` for its usual filters (published or
 *   not, one tag) is then a row read, where it was a scan of every matching
 *   post, after every write.
 * - **Tags listed in the list's own order.** post_tags carries its post's
 *   is_published and created_at, so that a tag's page in date order is a
 *   range of one index (tag, is_published, created_at, post_id) from either
 *   end, not a search among all of that tag's posts. created_at never
 *   changes; is_published follows its post by trigger.
 * - **Seeks by (key, id).** The posts' list indexes end with the id, the
 *   tie-breaker of every sort, so that a page can start after a (key, id)
 *   pair (the cursors of next and previous) through the index.
 *
 * PostgreSQL's triggers are per statement, over transition tables: a bulk
 * insert of a million posts changes each counter once, not a million
 * times. SQLite's are per row (it has nothing else), which costs it an
 * UPDATE of a counter row per post written.
 */
import type { Dialect } from './sql.js';

export const BLOG_LISTING = 'post lists at a cost that does not grow with the posts: kept counts, tags in list order, seeks by (key, id)';

const SQLITE = `
  ALTER TABLE post_tags ADD COLUMN is_published INTEGER NOT NULL DEFAULT 1;
  ALTER TABLE post_tags ADD COLUMN created_at TEXT NOT NULL DEFAULT '';
  UPDATE post_tags SET
    is_published = (SELECT is_published FROM posts WHERE posts.id = post_tags.post_id),
    created_at = (SELECT created_at FROM posts WHERE posts.id = post_tags.post_id);
  DROP INDEX post_tags_tag;
  CREATE INDEX post_tags_listing ON post_tags (tag, is_published, created_at, post_id);

  CREATE TABLE tag_counts (
    tag TEXT PRIMARY KEY COLLATE NOCASE,
    published INTEGER NOT NULL DEFAULT 0,
    drafts INTEGER NOT NULL DEFAULT 0
  );
  INSERT INTO tag_counts (tag, published, drafts)
    SELECT tag, sum(is_published = 1), sum(is_published = 0) FROM post_tags GROUP BY tag;
  INSERT INTO counters (name, value) VALUES
    ('posts.published', (SELECT count(*) FROM posts WHERE is_published = 1)),
    ('posts.drafts', (SELECT count(*) FROM posts WHERE is_published = 0));

  CREATE TRIGGER posts_counted_insert AFTER INSERT ON posts BEGIN
    UPDATE counters SET value = value + 1 WHERE name = CASE WHEN NEW.is_published THEN 'posts.published' ELSE 'posts.drafts' END;
  END;
  CREATE TRIGGER posts_counted_delete AFTER DELETE ON posts BEGIN
    UPDATE counters SET value = value - 1 WHERE name = CASE WHEN OLD.is_published THEN 'posts.published' ELSE 'posts.drafts' END;
  END;
  CREATE TRIGGER posts_published_changed AFTER UPDATE OF is_published ON posts WHEN OLD.is_published IS NOT NEW.is_published BEGIN
    UPDATE counters SET value = value + 1 WHERE name = CASE WHEN NEW.is_published THEN 'posts.published' ELSE 'posts.drafts' END;
    UPDATE counters SET value = value - 1 WHERE name = CASE WHEN OLD.is_published THEN 'posts.published' ELSE 'posts.drafts' END;
    UPDATE post_tags SET is_published = NEW.is_published WHERE post_id = NEW.id;
  END;
  CREATE TRIGGER post_tags_counted_insert AFTER INSERT ON post_tags BEGIN
    INSERT INTO tag_counts (tag, published, drafts) VALUES (NEW.tag, NEW.is_published = 1, NEW.is_published = 0)
      ON CONFLICT (tag) DO UPDATE SET published = published + excluded.published, drafts = drafts + excluded.drafts;
  END;
  CREATE TRIGGER post_tags_counted_delete AFTER DELETE ON post_tags BEGIN
    UPDATE tag_counts SET published = published - (OLD.is_published = 1), drafts = drafts - (OLD.is_published = 0) WHERE tag = OLD.tag;
  END;
  CREATE TRIGGER post_tags_published_changed AFTER UPDATE OF is_published ON post_tags WHEN OLD.is_published IS NOT NEW.is_published BEGIN
    UPDATE tag_counts SET
      published = published + (NEW.is_published = 1) - (OLD.is_published = 1),
      drafts = drafts + (NEW.is_published = 0) - (OLD.is_published = 0)
      WHERE tag = NEW.tag;
  END;
`;

const POSTGRES = `
  ALTER TABLE post_tags ADD COLUMN is_published BOOLEAN, ADD COLUMN created_at TEXT;
  UPDATE post_tags t SET is_published = p.is_published, created_at = p.created_at FROM posts p WHERE p.id = t.post_id;
  ALTER TABLE post_tags ALTER COLUMN is_published SET NOT NULL, ALTER COLUMN created_at SET NOT NULL;
  DROP INDEX post_tags_tag;
  CREATE INDEX post_tags_listing ON post_tags (tag, is_published, created_at, post_id);
  DROP INDEX posts_published_created;
  CREATE INDEX posts_published_created ON posts (is_published, created_at, id);
  DROP INDEX posts_published_title;
  CREATE INDEX posts_published_title ON posts (is_published, (lower(title) COLLATE "C"), id);

  CREATE TABLE tag_counts (
    tag TEXT PRIMARY KEY,
    published BIGINT NOT NULL DEFAULT 0,
    drafts BIGINT NOT NULL DEFAULT 0
  );
  INSERT INTO tag_counts (tag, published, drafts)
    SELECT tag, count(*) FILTER (WHERE is_published), count(*) FILTER (WHERE NOT is_published) FROM post_tags GROUP BY tag;
  INSERT INTO counters (name, value) VALUES
    ('posts.published', (SELECT count(*) FROM posts WHERE is_published)),
    ('posts.drafts', (SELECT count(*) FROM posts WHERE NOT is_published));

  -- Each function sees the rows its statement changed: added (inserted, or as updated) and removed (deleted, or as
  -- they were before the update); a change that moves nothing updates nothing.
  CREATE FUNCTION miniapp_posts_counted() RETURNS trigger LANGUAGE plpgsql AS $$
  DECLARE
    published BIGINT := 0;
    drafts BIGINT := 0;
  BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
      SELECT published + count(*) FILTER (WHERE is_published), drafts + count(*) FILTER (WHERE NOT is_published)
        INTO published, drafts FROM added;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
      SELECT published - count(*) FILTER (WHERE is_published), drafts - count(*) FILTER (WHERE NOT is_published)
        INTO published, drafts FROM removed;
    END IF;
    IF published <> 0 THEN UPDATE counters SET value = value + published WHERE name = 'posts.published'; END IF;
    IF drafts <> 0 THEN UPDATE counters SET value = value + drafts WHERE name = 'posts.drafts'; END IF;
    IF TG_OP = 'UPDATE' THEN
      UPDATE post_tags t SET is_published = a.is_published
        FROM added a JOIN removed r ON r.id = a.id
        WHERE t.post_id = a.id AND a.is_published IS DISTINCT FROM r.is_published;
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER posts_counted_insert AFTER INSERT ON posts REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_posts_counted();
  CREATE TRIGGER posts_counted_update AFTER UPDATE ON posts REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_posts_counted();
  CREATE TRIGGER posts_counted_delete AFTER DELETE ON posts REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_posts_counted();

  -- One change per tag the statement touched (what it adds less what it removes), so that tag_counts changes once
  -- per tag. A transition table exists only for the operations that have it, hence a statement per operation.
  CREATE FUNCTION miniapp_tags_counted() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO tag_counts AS c (tag, published, drafts)
        SELECT tag, count(*) FILTER (WHERE is_published), count(*) FILTER (WHERE NOT is_published) FROM added GROUP BY tag
        ON CONFLICT (tag) DO UPDATE SET published = c.published + excluded.published, drafts = c.drafts + excluded.drafts;
    ELSIF TG_OP = 'DELETE' THEN
      UPDATE tag_counts c SET published = c.published - d.published, drafts = c.drafts - d.drafts
        FROM (SELECT tag, count(*) FILTER (WHERE is_published) AS published, count(*) FILTER (WHERE NOT is_published) AS drafts
              FROM removed GROUP BY tag) d
        WHERE c.tag = d.tag;
    ELSE
      UPDATE tag_counts c SET published = c.published + d.published, drafts = c.drafts + d.drafts
        FROM (SELECT tag, sum(published) AS published, sum(drafts) AS drafts FROM (
                SELECT tag, CASE WHEN is_published THEN 1 ELSE 0 END AS published, CASE WHEN is_published THEN 0 ELSE 1 END AS drafts FROM added
                UNION ALL
                SELECT tag, CASE WHEN is_published THEN -1 ELSE 0 END, CASE WHEN is_published THEN 0 ELSE -1 END FROM removed
              ) moved GROUP BY tag) d
        WHERE c.tag = d.tag AND (d.published <> 0 OR d.drafts <> 0);
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER post_tags_counted_insert AFTER INSERT ON post_tags REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_tags_counted();
  CREATE TRIGGER post_tags_counted_update AFTER UPDATE ON post_tags REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_tags_counted();
  CREATE TRIGGER post_tags_counted_delete AFTER DELETE ON post_tags REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION miniapp_tags_counted();
`;

/**
 * PostgreSQL only: the leases of the instances that answer post lists from
 * the posts' version they know without asking (store/version-lease.ts), and
 * the notification of every move of that version, from whatever writes it.
 */
const POSTGRES_VERSION_LEASES = `
  CREATE TABLE cache_leases (
    counter TEXT NOT NULL,
    instance TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    seen BIGINT NOT NULL,
    PRIMARY KEY (counter, instance)
  );
  CREATE FUNCTION miniapp_counter_moved() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('miniapp_counter_' || NEW.name, NEW.value::text);
    RETURN NULL;
  END $$;
  CREATE TRIGGER counters_posts_moved AFTER UPDATE ON counters FOR EACH ROW
    WHEN (NEW.name = 'posts' AND NEW.value IS DISTINCT FROM OLD.value) EXECUTE FUNCTION miniapp_counter_moved();
`;

export function blogListingSchema(dialect: Dialect): string {
  return dialect === 'postgres' ? POSTGRES + POSTGRES_VERSION_LEASES : SQLITE;
}
