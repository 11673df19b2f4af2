/**
 * withPage rewrites plain list URLs as text; whatever the URL, its answer is
 * the URL parser's (new URL + searchParams.set), which the links were built
 * with before.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { withPage } from '../../src/blog/page-links.js';

function byParser(url: string, page: number, cursor: { after?: string; before?: string } = {}): string {
  const parsed = new URL(url, 'http://relative.invalid');
  parsed.searchParams.set('page', String(page));
  parsed.searchParams.delete('after');
  parsed.searchParams.delete('before');
  if (cursor.after !== undefined) parsed.searchParams.append('after', cursor.after);
  if (cursor.before !== undefined) parsed.searchParams.append('before', cursor.before);
  return `${parsed.pathname}${parsed.search}`;
}

function outcome(run: () => string): string {
  try {
    return run();
  } catch (error) {
    return `throws ${(error as { code?: string }).code}`;
  }
}

describe('withPage', () => {
  it.each([
    ['/api/v2/blog/posts?page_size=20', 2, '/api/v2/blog/posts?page_size=20&page=2'],
    ['/api/v2/blog/posts?page_size=20&page=250&nocache=7', 251, '/api/v2/blog/posts?page_size=20&page=251&nocache=7'],
    ['/api/v2/blog/posts?page=3&sort=title&page=9', 2, '/api/v2/blog/posts?page=2&sort=title'],
    ['/api/v2/blog/posts', 2, '/api/v2/blog/posts?page=2'],
    ['/api/v2/blog/posts?', 2, '/api/v2/blog/posts?page=2'],
    ['/api/v2/blog/posts?PAGE=3', 2, '/api/v2/blog/posts?PAGE=3&page=2'],
    ['/api/v2/blog/posts?search=a+b&tags=x,y', 2, '/api/v2/blog/posts?search=a+b&tags=x%2Cy&page=2'],
    ['/api/v2/blog/posts?search=%ED%95%9C&flag', 2, '/api/v2/blog/posts?search=%ED%95%9C&flag=&page=2'],
    ['/api/v2/blog/./posts?a=1&&b=2', 2, '/api/v2/blog/posts?a=1&b=2&page=2'],
    ['//evil.example/api/v2/blog/posts?a=1', 2, '/api/v2/blog/posts?a=1&page=2'],
    ['/api/v2/blog/posts?a=b=c#frag', 2, '/api/v2/blog/posts?a=b%3Dc&page=2'],
  ])('%s with page %d is %s', (url, page, expected) => {
    expect(withPage(url, page)).toBe(expected);
    expect(byParser(url, page)).toBe(expected);
  });

  it.each([
    ['/api/v2/blog/posts?page_size=20', 2, { after: 'WyItY3JlYXRlZF9hdCJd' }, '/api/v2/blog/posts?page_size=20&page=2&after=WyItY3JlYXRlZF9hdCJd'],
    ['/api/v2/blog/posts?page=3&after=old&page_size=5', 4, { after: 'new_-A' }, '/api/v2/blog/posts?page=4&page_size=5&after=new_-A'],
    ['/api/v2/blog/posts?page=3&after=old', 2, { before: 'b' }, '/api/v2/blog/posts?page=2&before=b'],
    ['/api/v2/blog/posts?before=x&page=2&sort=title', 1, {}, '/api/v2/blog/posts?page=1&sort=title'],
    ['/api/v2/blog/posts?search=a+b&after=x', 2, { after: 'c' }, '/api/v2/blog/posts?search=a+b&page=2&after=c'],
  ])('%s with page %d and %j is %s', (url, page, cursor, expected) => {
    expect(withPage(url, page, cursor)).toBe(expected);
    expect(byParser(url, page, cursor)).toBe(expected);
  });

  it('answers what the URL parser answers, for any request target', () => {
    const alphabet = fc.constantFrom(...'aZ09_-.*~/?&=%+ #:\\@!\'"é한\u0000\t'.split(''), 'page', 'page=', '%2e', '%41', '..', '//');
    const target = fc.array(alphabet, { maxLength: 30 }).map((parts) => `/${parts.join('')}`);
    const plain = fc
      .tuple(
        fc.array(fc.constantFrom('api', 'v2', 'blog', 'posts', 'a-b', 'x_y'), { minLength: 1, maxLength: 4 }),
        fc.array(
          fc.tuple(
            fc.constantFrom('page', 'page_size', 'sort', 'nocache', 'a.b', '*', '', 'after', 'before'),
            fc.constantFrom('1', '20', '-title', '', 'x.y*'),
          ),
          { maxLength: 5 },
        ),
      )
      .map(([segments, pairs]) => `/${segments.join('/')}${pairs.length ? `?${pairs.map(([name, value]) => `${name}=${value}`).join('&')}` : ''}`);
    fc.assert(
      fc.property(
        fc.oneof(target, plain),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.constantFrom({}, { after: 'WyJ0aXRsZSIsImEiLDFd' }, { before: 'a-b_c' }),
        (url, page, cursor) => {
          // A target the parser refuses ('///': no host) is refused alike.
          expect(outcome(() => withPage(url, page, cursor))).toBe(outcome(() => byParser(url, page, cursor)));
        },
      ),
      { numRuns: 5000 },
    );
  });
});
