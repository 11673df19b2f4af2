/**
 * The one redaction of URLs, for everything a person, a log store or a
 * trace collector may keep: log lines (request URLs, upstream failures),
 * messages, serve's banner, span attributes. The password of the userinfo
 * becomes `***`; every query value becomes `REDACTED` but those of a few
 * names known to hold nothing secret (paging, filters, sslmode), because a
 * query may carry a token (`?token=mat_...`, the graph API's
 * `access_token`) and an unknown name is treated as one. A path alone
 * (`/api/v2/posts?token=...`, as servers log it) is redacted the same way.
 */

/** Query parameters whose values are kept: they page, filter or configure, and never carry a credential. */
const PLAIN_QUERY_NAMES = new Set([
  'after',
  'author',
  'before',
  'cursor',
  'direction',
  'fields',
  'format',
  'is_published',
  'level',
  'limit',
  'metric',
  'offset',
  'order',
  'page',
  'page_size',
  'period',
  'per_page',
  'search',
  'since',
  'sort',
  'sslmode',
  'status',
  'tag',
  'until',
]);

const REDACTED = 'REDACTED';

export function redactUrl(url: string | URL): string {
  const text = String(url);
  const mark = text.indexOf('?');
  const hash = text.indexOf('#', Math.max(mark, 0));
  const end = hash < 0 ? text.length : hash;
  const base = redactUserinfo(mark < 0 ? text.slice(0, end) : text.slice(0, mark));
  if (mark < 0) return base;
  const query = text
    .slice(mark + 1, end)
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals < 0 ? pair : pair.slice(0, equals);
      if (equals < 0) return name;
      return PLAIN_QUERY_NAMES.has(decodeName(name)) ? pair : `${name}=${REDACTED}`;
    });
  return `${base}?${query.join('&')}`;
}

/** `scheme://user:password@host/...` with the password as `***`; anything without userinfo as it is. */
function redactUserinfo(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon < 0 ? `${scheme}${userinfo}@` : `${scheme}${userinfo.slice(0, colon)}:***@`;
  });
}

function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}
