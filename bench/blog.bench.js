/**
 * The blog API's post list, `GET /api/v2/blog/posts?page_size=20`, over
 * 10,000 posts, against a floor: a bare Fastify app (the project's own
 * fastify) with one route answering a constant, pre-serialised JSON string,
 * the exact bytes the real route answered for the same request, so both
 * answers are the same size. Same load generator (autocannon), same
 * settings, same run.
 *
 * Layout: the real server (startServe from dist/, memory store; with no
 * upstream it also starts its embedded partner sandbox, idle here) and the
 * floor each run on their own worker thread (this file is also the
 * workers' script), autocannon on the main thread. Only one side is under
 * load at a time.
 *
 * Seeding: 10,000 posts through the API itself (POST /api/v2/blog/posts,
 * 32 in flight), by five authors who register and log in through the API,
 * plus the admin token; titles and contents are varied, a few hundred bytes
 * each (some Korean text, as the app's users write), with 0-3 tags. The
 * server's database is in memory and private to it, so the API is the only
 * honest way in; the PRNG is seeded, so every run has the same posts.
 *
 * Two pages are measured, each against its own floor (the floor answers
 * that page's bytes): page 1, and page 250 of 500 (OFFSET 4980), since an
 * OFFSET's cost grows with the page.
 *
 * Both pages are checked once before any timing: 200, count 10000, 20
 * results, newest first, and page 250 different from page 1. During the
 * runs autocannon compares every body with the verified one (expectBody),
 * and any error, time-out, non-2xx answer or mismatch fails the benchmark:
 * it must never time an error path.
 *
 * Each page is also measured uncached: every request a URL of its own (an
 * extra `&nocache=N` parameter the route ignores), so no answer comes from
 * the list cache, against the same floor loaded the same way (its router
 * ignores the parameter too). That is a row of its own per page (target
 * 0.5x, issue 14): SQLite, the memory store.
 *
 * Rounds alternate (real, floor; floor, real; ...) after one short warm-up
 * run of each. Each round gives requests/s (autocannon's mean of its
 * per-second samples) and p99 latency, the latter computed here from every
 * response's time as a float. A row's value is the median over rounds. The
 * issue gives no latency target and bench/run.js needs a finite one, so
 * p99 is reported in the notes rather than as a row of its own.
 *
 * Settings from the environment: BENCH_BLOG_SECONDS (per run, default 5),
 * BENCH_BLOG_ROUNDS (default 2), BENCH_BLOG_CONNECTIONS (default 10),
 * BENCH_BLOG_POSTS (default 10000).
 */
import { cpus } from 'node:os';
import { benchServe, closeRoles, envNumber, median, quantile } from './lib.js';
import { runRoleIfWorker, spawnRole } from './worker-roles.js';

const ROLE_FLAG = 'miniappBlogBench';
const LIST = '/api/v2/blog/posts';
const PAGE_SIZE = 20;
const SEED_IN_FLIGHT = 32;
const AUTHORS = 5;
const PASSWORD = 'correct-horse-battery';

// ---------------------------------------------------------------- workers

/** `miniapp serve` as the CLI starts it, memory store, no gRPC, no docs pages. */
async function startReal() {
  const running = await benchServe({
    store: { kind: 'memory' },
    grpc: false,
    hashCost: 10,
    docs: false,
  });
  return { info: { url: running.url, adminToken: running.adminToken }, close: () => running.close() };
}

/** The floor: bare Fastify, one route per measured path answering that page's bytes, pre-serialised. */
async function startFloor({ bodies }) {
  const { default: Fastify } = await import('fastify');
  const app = Fastify({ logger: false });
  const byPage = new Map(Object.entries(bodies));
  app.get(LIST, (request, reply) => {
    // One route, as the real one; the page picks which constant it answers.
    const body = byPage.get(String(request.query.page ?? '1'));
    if (body === undefined) return reply.code(404).send({ code: 'NOT_FOUND' });
    return reply.type('application/json; charset=utf-8').send(body);
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address();
  return { info: { url: `http://127.0.0.1:${port}` }, close: () => app.close() };
}

const ROLES = { real: startReal, floor: startFloor };

await runRoleIfWorker(ROLE_FLAG, ROLES);

// ---------------------------------------------------------------- main thread

// ---- seeding

/** mulberry32: a small seeded PRNG, so that every run seeds the same posts. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SUBJECTS = [
  'SQLite',
  'Fastify',
  'the relay',
  'mini-app login',
  'pagination',
  'image uploads',
  'webhooks',
  'gRPC',
  'TypeScript',
  'Node 20',
  'caching',
  'rate limits',
  'OAuth2 tokens',
  'the partner sandbox',
  'schema migrations',
  'OpenAPI docs',
  '미니앱 로그인',
  '페이지네이션',
  '이미지 업로드',
  '웹훅',
];
const OPENERS = [
  'Notes on',
  'A week with',
  'Why we moved to',
  'Debugging',
  'Five lessons from',
  'Getting started with',
  'Measuring',
  'Rethinking',
  '회고:',
  'Shipping',
];
const WORDS = (
  'the a request response server client database index query page offset limit token user post tag author latency ' +
  'throughput budget cache header body stream socket worker thread event loop schema route plugin hook error retry ' +
  'deploy release review test bench floor target ratio median spread noise core memory disk json string number ' +
  '서버 요청 응답 사용자 게시글 태그 데이터베이스 성능 측정 배포'
).split(' ');
const TAGS = [
  'node',
  'typescript',
  'sqlite',
  'fastify',
  'grpc',
  'performance',
  'security',
  'devops',
  'testing',
  'api',
  'frontend',
  'backend',
  'tutorial',
  'release-notes',
  'postmortem',
  'design',
  'database',
  'oauth',
  'webhooks',
  'korea',
  '개발',
  '회고',
  '성능',
  '튜토리얼',
];

function makePost(random, i) {
  const pick = (list) => list[Math.floor(random() * list.length)];
  const title = `${pick(OPENERS)} ${pick(SUBJECTS)}${random() < 0.3 ? ` (part ${1 + Math.floor(random() * 5)})` : ''} #${i + 1}`;
  const sentences = [];
  let length = 0;
  const want = 200 + Math.floor(random() * 400);
  while (length < want) {
    const count = 6 + Math.floor(random() * 12);
    const words = Array.from({ length: count }, () => pick(WORDS));
    const sentence = `${words.join(' ')}.`;
    sentences.push(sentence[0].toUpperCase() + sentence.slice(1));
    length += sentence.length + 1;
  }
  const tags = new Set();
  const tagCount = Math.floor(random() * 4);
  while (tags.size < tagCount) tags.add(pick(TAGS));
  return { title, content: sentences.join(' '), tags: [...tags] };
}

async function postJson(url, body, token) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, text };
}

/** Five authors through POST /users and POST /auth/login; their tokens, and the admin's. */
export async function authorTokens(url, adminToken) {
  const tokens = [adminToken];
  for (let i = 1; i <= AUTHORS; i++) {
    const user = { username: `writer${i}`, email: `writer${i}@example.com`, password: PASSWORD, bio: `Writer number ${i}.` };
    const created = await postJson(`${url}/api/v2/users`, user);
    if (created.status !== 201) throw new Error(`POST /api/v2/users answered ${created.status}: ${created.text.slice(0, 300)}`);
    const login = await postJson(`${url}/api/v2/auth/login`, { email: user.email, password: PASSWORD });
    if (login.status !== 200) throw new Error(`POST /api/v2/auth/login answered ${login.status}: ${login.text.slice(0, 300)}`);
    tokens.push(JSON.parse(login.text).access_token);
  }
  return tokens;
}

/** `count` posts through POST /api/v2/blog/posts, SEED_IN_FLIGHT at a time; any answer but 201 throws. */
export async function seed(url, tokens, count) {
  const random = prng(20261121);
  const posts = Array.from({ length: count }, (_, i) => makePost(random, i));
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      const { status, text } = await postJson(`${url}${LIST}`, posts[i], tokens[i % tokens.length]);
      if (status !== 201) throw new Error(`seeding post ${i + 1}: POST ${LIST} answered ${status}: ${text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: SEED_IN_FLIGHT }, lane));
  const bytes = posts.reduce((sum, post) => sum + Buffer.byteLength(post.title) + Buffer.byteLength(post.content), 0);
  return { meanBytes: bytes / count };
}

// ---- checking and loading

export const pathOf = (page) => `${LIST}?page_size=${PAGE_SIZE}${page === 1 ? '' : `&page=${page}`}`;

/** GET a page once; throws unless 200 with count `total`, PAGE_SIZE results, newest first. Returns { text, body }. */
export async function fetchPage(url, page, total) {
  const response = await fetch(`${url}${pathOf(page)}`);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${pathOf(page)} answered ${response.status}: ${text.slice(0, 300)}`);
  const body = JSON.parse(text);
  if (body.count !== total) throw new Error(`GET ${pathOf(page)} answered count ${body.count}, expected ${total}`);
  if (!Array.isArray(body.results) || body.results.length !== PAGE_SIZE) {
    throw new Error(`GET ${pathOf(page)} answered ${body.results?.length} results, expected ${PAGE_SIZE}`);
  }
  for (let i = 1; i < body.results.length; i++) {
    const [a, b] = [body.results[i - 1], body.results[i]];
    if (a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id)) {
      throw new Error(`GET ${pathOf(page)} is not newest first at result ${i}`);
    }
  }
  if (page > 1 !== (body.previous !== null)) throw new Error(`GET ${pathOf(page)} answered previous ${JSON.stringify(body.previous)}`);
  return { text, body };
}

/** The next number of a distinct URL (load's `distinct`), across every call in this process. */
let distinctUrls = 0;

/**
 * One autocannon run against `url + path`; resolves with { rps, p99, p50, total }
 * and throws on any error, time-out, non-2xx answer or body mismatch.
 */
export async function load(autocannon, { url, path, seconds, connections, expectBody, label, distinct = false }) {
  const times = [];
  // distinct: every request a URL of its own (an extra query parameter), so no answer comes from the list cache. The
  // numbers go on from call to call: a round that started again at 0 asked for URLs a warm-up or an earlier round had
  // asked for once, which the cache's doorkeeper admits the second time (serve copied and kept pages the floor never does).
  const requests = distinct ? [{ setupRequest: (request) => ({ ...request, path: `${path}&nocache=${distinctUrls++}` }) }] : undefined;
  const instance = autocannon({ url: `${url}${path}`, connections, pipelining: 1, duration: seconds, ...(distinct ? { requests } : { expectBody }) });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
  });
  const result = await instance;
  const failed = { errors: result.errors, timeouts: result.timeouts, non2xx: result.non2xx, mismatches: result.mismatches };
  if (Object.values(failed).some((count) => count > 0) || times.length === 0) {
    const counts = Object.entries(failed)
      .map(([name, count]) => `${name} ${count}`)
      .join(', ');
    throw new Error(
      `${label}: the run was not all 2xx with the verified body (${counts}; status codes ${JSON.stringify(result.statusCodeStats)}; ${times.length} 2xx responses)`,
    );
  }
  times.sort((x, y) => x - y);
  return { rps: result.requests.mean, p99: quantile(times, 0.99), p50: quantile(times, 0.5), total: times.length };
}

export default async function blog(ctx) {
  const seconds = envNumber('BENCH_BLOG_SECONDS', 5);
  const rounds = envNumber('BENCH_BLOG_ROUNDS', 2);
  const connections = envNumber('BENCH_BLOG_CONNECTIONS', 10);
  const postCount = envNumber('BENCH_BLOG_POSTS', 10_000);
  const warmupSeconds = Math.min(2, seconds);
  const pages = [1, Math.max(1, Math.floor(postCount / PAGE_SIZE / 2))];
  const { default: autocannon } = await import('autocannon');

  const roles = [];
  try {
    const realSide = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'real');
    roles.push(realSide);
    const { url: realUrl, adminToken } = await realSide.ready;

    const seedStart = performance.now();
    const tokens = await authorTokens(realUrl, adminToken);
    const { meanBytes } = await seed(realUrl, tokens, postCount);
    const seedSeconds = (performance.now() - seedStart) / 1000;
    ctx.log(
      `seeded ${postCount} posts through the API in ${seedSeconds.toFixed(1)} s (${(postCount / seedSeconds).toFixed(0)} posts/s, ${meanBytes.toFixed(0)} bytes of title and content on average)`,
    );

    // The verified answers; the floor serves exactly these bytes.
    const answers = {};
    for (const page of pages) answers[page] = await fetchPage(realUrl, page, postCount);
    if (pages.length > 1 && answers[pages[1]].body.results[0].id === answers[1].body.results[0].id) {
      throw new Error(`page ${pages[1]} answered the same posts as page 1`);
    }
    const floorSide = spawnRole(new URL(import.meta.url), ROLE_FLAG, 'floor', { bodies: Object.fromEntries(pages.map((page) => [page, answers[page].text])) });
    roles.push(floorSide);
    const urls = { real: realUrl, floor: (await floorSide.ready).url };
    for (const page of pages) {
      const response = await fetch(`${urls.floor}${pathOf(page)}`);
      const text = await response.text();
      if (response.status !== 200 || text !== answers[page].text) throw new Error(`the floor did not answer page ${page}'s bytes (${response.status})`);
    }
    ctx.log(
      `real ${urls.real}, floor ${urls.floor}; ${connections} connections, ${seconds} s a run, ${rounds} rounds; bodies ${pages.map((p) => `page ${p} ${Buffer.byteLength(answers[p].text)} B`).join(', ')}`,
    );

    const measured = {};
    for (const page of pages) {
      const path = pathOf(page);
      const expectBody = answers[page].text;
      for (const name of ['real', 'floor']) {
        ctx.log(`page ${page} warm-up ${name} (${warmupSeconds} s)`);
        await load(autocannon, { url: urls[name], path, seconds: warmupSeconds, connections, expectBody, label: `page ${page} ${name} warm-up` });
      }
      const results = { real: [], floor: [] };
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? ['real', 'floor'] : ['floor', 'real'];
        for (const name of order) {
          const run = await load(autocannon, { url: urls[name], path, seconds, connections, expectBody, label: `page ${page} ${name} round ${round + 1}` });
          results[name].push(run);
          ctx.log(
            `page ${page} round ${round + 1} ${name}: ${run.rps.toFixed(0)} req/s, p50 ${run.p50.toFixed(2)} ms, p99 ${run.p99.toFixed(2)} ms (${run.total} requests)`,
          );
        }
      }
      // The same list with the cache defeated (every request a URL of its own, on both sides): what a request
      // costs when no answer is kept, against the floor loaded the same way.
      const cold = { real: [], floor: [] };
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? ['real', 'floor'] : ['floor', 'real'];
        for (const name of order) {
          const run = await load(autocannon, {
            url: urls[name],
            path,
            seconds,
            connections,
            label: `page ${page} ${name} uncached round ${round + 1}`,
            distinct: true,
          });
          cold[name].push(run);
          ctx.log(
            `page ${page} uncached round ${round + 1} ${name}: ${run.rps.toFixed(0)} req/s, p50 ${run.p50.toFixed(2)} ms, p99 ${run.p99.toFixed(2)} ms (${run.total} requests)`,
          );
        }
      }
      measured[page] = { results, bytes: Buffer.byteLength(expectBody), cold };
    }

    const setup =
      `autocannon ${connections} connections, pipelining 1, ${seconds} s x ${rounds} rounds alternating after a ${warmupSeconds} s warm-up of each, median of rounds; ` +
      `real server and floor on their own worker threads, load generator on the main thread, ${cpus().length} cores`;
    return pages.flatMap((page) => {
      const { results, bytes, cold } = measured[page];
      const summary = (runs, name, field) => median(runs[name].map((run) => run[field]));
      const list = (runs, name, field, digits) => runs[name].map((run) => run[field].toFixed(digits)).join(', ');
      const rps = { real: summary(results, 'real', 'rps'), floor: summary(results, 'floor', 'rps') };
      const coldRps = { real: summary(cold, 'real', 'rps'), floor: summary(cold, 'floor', 'rps') };
      const offset = (page - 1) * PAGE_SIZE;
      const floorName = `fastify route answering the same ${bytes} B constant`;
      return [
        {
          name: `blog GET ${pathOf(page)} throughput, ${postCount} posts`,
          value: rps.real,
          unit: 'req/s',
          floorName,
          floorValue: rps.floor,
          ratio: rps.real / rps.floor,
          target: 0.5,
          better: 'higher',
          note:
            `OFFSET ${offset}; rounds: real ${list(results, 'real', 'rps', 0)} req/s, floor ${list(results, 'floor', 'rps', 0)} req/s; ` +
            `p99 (no target in the issue) real ${summary(results, 'real', 'p99').toFixed(2)} ms, floor ${summary(results, 'floor', 'p99').toFixed(2)} ms ` +
            `(p50 real ${summary(results, 'real', 'p50').toFixed(2)}, floor ${summary(results, 'floor', 'p50').toFixed(2)} ms); ` +
            `repeated requests are answered from the list cache; ` +
            `${page === 1 ? `seeded through the API (${AUTHORS + 1} authors, 0-3 tags, ~${meanBytes.toFixed(0)} B of text a post) in ${seedSeconds.toFixed(1)} s; ` : ''}${setup}`,
        },
        {
          name: `blog GET ${pathOf(page)} uncached throughput, ${postCount} posts`,
          value: coldRps.real,
          unit: 'req/s',
          floorName,
          floorValue: coldRps.floor,
          ratio: coldRps.real / coldRps.floor,
          target: 0.5,
          better: 'higher',
          note:
            `every request a distinct URL (&nocache=N) on both sides, so no answer comes from the list cache; SQLite (memory store); ` +
            `rounds: real ${list(cold, 'real', 'rps', 0)} req/s, floor ${list(cold, 'floor', 'rps', 0)} req/s; ` +
            `p50 real ${summary(cold, 'real', 'p50').toFixed(2)}, floor ${summary(cold, 'floor', 'p50').toFixed(2)} ms; ` +
            `p99 real ${summary(cold, 'real', 'p99').toFixed(2)}, floor ${summary(cold, 'floor', 'p99').toFixed(2)} ms; ` +
            `${offset >= 100 ? 'a page by number is read from the nearer end of the list, its start found through the index alone (the rows before it are skipped in the index, never read); ' : ''}same setup`,
        },
      ];
    });
  } finally {
    await closeRoles(roles, ctx.log);
  }
}
