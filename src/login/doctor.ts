/**
 * The checks of `miniapp doctor`, as data: each says what it looked at and
 * what it found, never a secret. The upstream check counts any HTTP answer
 * (a FAIL envelope for the probe token included) as proof that TLS and
 * routing work.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { MiniappError } from '../errors.js';
import { formatDuration } from '../duration.js';
import { describeAad, parseAad, parseKey } from './key-material.js';
import { tokenState, type StoredTokens } from './session.js';
import { PARTNER_PREFIXES, prefixName, type PartnerPrefixName } from './partner-prefix.js';

type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';
export interface Check {
  check: string;
  status: CheckStatus;
  detail: string;
}

type Input = { value?: string | undefined; error?: string };

export interface DoctorInput {
  now: Date;
  key: Input;
  aad: Input;
  /** PEM text, already read from path or setting. */
  cert: Input;
  privateKey: Input;
  ca: Input;
  baseUrl: Input;
  /** The path-prefix in effect. */
  pathPrefix?: string | undefined;
  tokens: StoredTokens | undefined;
  /**
   * One call to login-me with a token that cannot be valid, under the given prefix (default: the one in effect):
   * its status, whether the body was a partner answer, and the URL it went to (undefined: the base URL already
   * names the whole partner path, so another prefix would call the same URL).
   */
  probe: (pathPrefix?: string) => Promise<ProbeAnswer>;
}

interface ProbeAnswer {
  status: number;
  /** Whether the body was one of the partner API's answers (its envelope, a bare OAuth error, a top-level errorCode). */
  envelope: boolean;
  /** Whether the prefix decided the URL (false when base-url already ends in the partner path). */
  prefixed?: boolean;
}

const EXPIRY_WARNING_MS = 30 * 86_400_000;

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export async function runChecks(input: DoctorInput): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (check: string, status: CheckStatus, detail: string) => checks.push({ check, status, detail });

  if (input.key.error) add('decrypt key', 'fail', input.key.error);
  else if (!input.key.value) add('decrypt key', 'fail', 'not set: `miniapp config set decrypt-key KEY`');
  else {
    try {
      const key = parseKey(input.key.value);
      add('decrypt key', 'ok', `${key.bytes.length} bytes, read as ${key.encoding === 'hex' ? 'hex' : 'Base64'}`);
    } catch (error) {
      add('decrypt key', 'fail', message(error));
    }
  }
  if (input.aad.error) add('decrypt AAD', 'fail', input.aad.error);
  else if (!input.aad.value) add('decrypt AAD', 'fail', 'not set: `miniapp config set decrypt-aad text:VALUE` (or hex:HEX)');
  else {
    try {
      add('decrypt AAD', 'ok', describeAad(parseAad(input.aad.value)));
    } catch (error) {
      add('decrypt AAD', 'fail', message(error));
    }
  }

  let certificate: X509Certificate | undefined;
  const tlsConfigured = Boolean(input.cert.value || input.privateKey.value);
  if (input.cert.error) add('client certificate', 'fail', input.cert.error);
  else if (!input.cert.value) {
    add('client certificate', tlsConfigured ? 'fail' : 'warn', 'not set: the production partner API accepts only mutual TLS (mtls-cert, mtls-key)');
  } else {
    try {
      certificate = new X509Certificate(input.cert.value);
      const left = Date.parse(certificate.validTo) - input.now.getTime();
      const subject = certificate.subject.replace(/\n/g, ', ');
      if (left <= 0) add('client certificate', 'fail', `${subject}: expired on ${certificate.validTo}`);
      else if (Date.parse(certificate.validFrom) > input.now.getTime())
        add('client certificate', 'fail', `${subject}: not valid before ${certificate.validFrom}`);
      else add('client certificate', left < EXPIRY_WARNING_MS ? 'warn' : 'ok', `${subject}: valid until ${certificate.validTo} (${formatDuration(left)} left)`);
    } catch (error) {
      add('client certificate', 'fail', `does not parse as an X.509 certificate: ${message(error)}`);
    }
  }
  if (input.privateKey.error) add('client key', 'fail', input.privateKey.error);
  else if (!input.privateKey.value) {
    if (tlsConfigured) add('client key', 'fail', 'mtls-key is not set but mtls-cert is');
  } else {
    try {
      const key = createPrivateKey(input.privateKey.value);
      if (certificate && !certificate.checkPrivateKey(key)) add('client key', 'fail', 'does not match the client certificate');
      else add('client key', 'ok', `${key.asymmetricKeyType ?? 'unknown'} key${certificate ? ', matches the certificate' : ''}`);
    } catch (error) {
      add('client key', 'fail', `does not parse as a private key: ${message(error)}`);
    }
  }
  if (input.ca.error) add('CA', 'fail', input.ca.error);
  else if (input.ca.value) {
    try {
      const ca = new X509Certificate(input.ca.value);
      add('CA', Date.parse(ca.validTo) > input.now.getTime() ? 'ok' : 'fail', `${ca.subject.replace(/\n/g, ', ')}, valid until ${ca.validTo}`);
    } catch (error) {
      add('CA', 'fail', `does not parse as an X.509 certificate: ${message(error)}`);
    }
  }

  if (input.baseUrl.error) add('partner API', 'fail', input.baseUrl.error);
  else if (!input.baseUrl.value) add('partner API', 'fail', 'base-url is not set');
  else {
    try {
      const { status, envelope } = await input.probe();
      const secure = input.baseUrl.value.startsWith('https:');
      const local = /^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:|\/|$)/.test(input.baseUrl.value);
      if (envelope) {
        add(
          'partner API',
          secure || local ? 'ok' : 'warn',
          secure
            ? `${input.baseUrl.value} answered HTTP ${status} as the partner API does: TLS and routing work`
            : `${input.baseUrl.value} answered HTTP ${status} as the partner API does: routing works, but over plain HTTP (no TLS, no client certificate); the production API takes https only`,
        );
      } else if (status === 404) add('partner API', 'fail', await notFoundDetail(input));
      else
        add(
          'partner API',
          'warn',
          `${input.baseUrl.value} answered HTTP ${status}, but not as the partner API does (its envelope, a bare OAuth error or an errorCode)`,
        );
    } catch (error) {
      const hint = error instanceof MiniappError && error.hint ? ` (${error.hint})` : '';
      add('partner API', 'fail', `${message(error)}${hint}`);
    }
  }

  if (!input.tokens) add('stored tokens', 'skip', 'none: `miniapp token exchange --code CODE`');
  else {
    const state = tokenState(input.tokens, input.now);
    if (state.refreshExpired) add('stored tokens', 'fail', 'the refresh token has expired: log in again');
    else if (state.accessExpired) add('stored tokens', 'warn', `access token expired; refresh token has ${formatDuration(state.refreshMsLeft)} left`);
    else add('stored tokens', 'ok', `access token ${formatDuration(state.accessMsLeft)} left, refresh token ${formatDuration(state.refreshMsLeft)} left`);
  }
  return checks;
}

/**
 * A 404 at the prefix in effect: when another known prefix (the spec's or the production one) answers as the
 * partner API does, say which and the setting that picks it; else point at path-prefix.
 */
async function notFoundDetail(input: DoctorInput): Promise<string> {
  const base = input.baseUrl.value!;
  const current = input.pathPrefix ?? PARTNER_PREFIXES.spec;
  const generic = `${base} answered 404 at ${current}: check path-prefix (spec: ${PARTNER_PREFIXES.spec}; production: ${PARTNER_PREFIXES.production})`;
  for (const name of Object.keys(PARTNER_PREFIXES) as PartnerPrefixName[]) {
    const other = PARTNER_PREFIXES[name];
    if (other === current) continue;
    let answer: ProbeAnswer;
    try {
      answer = await input.probe(other);
    } catch {
      continue;
    }
    if (answer.prefixed === false) return `${base} answered 404: the base URL names the whole partner path; check it`;
    if (answer.envelope) {
      const known = prefixName(current);
      return (
        `${base} answered 404 at ${known ? `the ${known} prefix ` : ''}${current}, but the partner API answers at ${other} ` +
        `(the ${name} prefix): \`miniapp config set path-prefix ${name}\` (or MINIAPP_PATH_PREFIX=${name})`
      );
    }
  }
  return generic;
}
