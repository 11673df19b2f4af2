/**
 * The floor of an uncached blog page on PostgreSQL (bench/postgres.bench.js):
 * a bare Fastify route, GET /api/v2/blog/posts, that runs the statement
 * `miniapp serve` runs for `?page_size=20` when the list cache cannot answer
 * (traced from serve: the page of published posts newest first as JSON
 * written by the database from each post's stored JSON, the kept count and
 * the version) through `pg`, prepared by name as serve prepares it, on a
 * pool of the same size, and sends its bytes in the answer's shape: count,
 * the next link with its cursor (as serve makes it), no previous link, the
 * results. No schema, no hooks, no cache, no store seam: the statement and
 * the bytes.
 */
export const PAGE_SIZE = 20;

/** Serve's statement for page 1 of the published posts, newest first, PAGE_SIZE a page (src/store: the post listing on PostgreSQL). */
const PAGE = `WITH c AS (SELECT (SELECT value FROM counters WHERE name = 'posts.published') AS total) SELECT (SELECT value FROM counters WHERE name = 'posts') AS version, (SELECT total FROM c) AS total, a.* FROM (SELECT '[' || coalesce(string_agg(page.answer_json, ',' ORDER BY page.k DESC, page.i DESC), '') || ']' AS json, count(*) AS shown, (array_agg(page.k ORDER BY page.k DESC, page.i DESC))[1] AS first_key, (array_agg(page.i ORDER BY page.k DESC, page.i DESC))[1] AS first_id, (array_agg(page.k ORDER BY page.k DESC, page.i DESC))[count(*)] AS last_key, (array_agg(page.i ORDER BY page.k DESC, page.i DESC))[count(*)] AS last_id FROM (SELECT p.answer_json, p.created_at AS k, p.id AS i FROM posts p WHERE p.is_published = $1 ORDER BY p.created_at DESC, p.id DESC LIMIT ${PAGE_SIZE}) page) a`;

/** Starts the floor on the database at `url` (one serve has migrated and seeded); HTTP on 127.0.0.1:0. */
export async function startPageFloor({ url, poolSize }) {
  const [{ default: Fastify }, { default: pg }] = await Promise.all([import('fastify'), import('pg')]);
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  const app = Fastify({ logger: false });
  app.get('/api/v2/blog/posts', async (request, reply) => {
    const { rows } = await pool.query({ name: 'floor_page', text: PAGE, values: [true] });
    const page = rows[0];
    const total = Number(page.total);
    const cursor = Buffer.from(JSON.stringify(['-created_at', page.last_key, Number(page.last_id)])).toString('base64url');
    const next = total > PAGE_SIZE ? `${request.url}&page=2&after=${cursor}` : null;
    reply.type('application/json; charset=utf-8');
    return `{"count":${total},"next":${JSON.stringify(next)},"previous":null,"results":${page.json}}`;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await app.close();
      await pool.end();
    },
  };
}
