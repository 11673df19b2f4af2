/**
 * The WWW-Authenticate challenge of a 401 for a Bearer token (RFC 6750
 * section 3): `Bearer realm="...", error="invalid_token",
 * error_description="..."`. The blog API answers its 401s with the bare
 * scheme (`Bearer`), which is this with no attributes; the relay names the
 * error, so that a client can tell "log in" from "refresh and retry".
 */

/** RFC 6750 section 3.1; no error code at all when the request carried no credentials. */
type BearerError = 'invalid_request' | 'invalid_token' | 'insufficient_scope';

export interface BearerChallenge {
  realm?: string;
  error?: BearerError;
  description?: string;
}

/** error_description and realm allow printable ASCII without `"` and `\` (RFC 6750 section 3). */
function quotable(text: string): string {
  return text
    .replace(/[^\x20-\x7e]|["\\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

export function bearerChallenge(challenge: BearerChallenge = {}): string {
  const params: string[] = [];
  if (challenge.realm) params.push(`realm="${quotable(challenge.realm)}"`);
  if (challenge.error) params.push(`error="${challenge.error}"`);
  if (challenge.error && challenge.description) params.push(`error_description="${quotable(challenge.description)}"`);
  return params.length > 0 ? `Bearer ${params.join(', ')}` : 'Bearer';
}
