/**
 * Turns what undici and node:tls throw into one UpstreamError (exit 5) that
 * says which of time-out, network or TLS went wrong and what to do. The
 * interesting code is often a few `cause`s deep.
 */
import { redactUrl } from './url-redaction.js';
import { MiniappError, UpstreamError } from './errors.js';

function chain(error: unknown): (Error & { code?: string })[] {
  const out: (Error & { code?: string })[] = [];
  let current: unknown = error;
  while (current instanceof Error && out.length < 8) {
    out.push(current as Error & { code?: string });
    current = (current as Error & { cause?: unknown }).cause;
  }
  return out;
}

const CLOSED_AFTER_HANDSHAKE = 'ERR_TLS_CLOSED_AFTER_HANDSHAKE';
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
const UNTRUSTED_SERVER = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

export interface TransportContext {
  /** What was being reached, for the message: "the partner API". */
  service: string;
  url: string;
  timeoutMs: number;
  /** Whether a client certificate was presented. */
  clientCertificate: boolean;
  /** Setting names to mention in TLS hints. */
  tlsSettings?: { cert: string; key: string; ca: string };
}

export function transportError(error: unknown, context: TransportContext): MiniappError {
  if (error instanceof MiniappError) return error;
  const links = chain(error);
  const codes = links.map((e) => e.code ?? '').filter(Boolean);
  const text = links.map((e) => `${e.name} ${e.message}`).join(' | ');
  const settings = context.tlsSettings ?? { cert: 'mtls-cert', key: 'mtls-key', ca: 'mtls-ca' };
  const where = `${context.service} at ${redactUrl(context.url)}`;

  if (links.some((e) => e.name === 'TimeoutError') || codes.some((c) => TIMEOUT_CODES.has(c))) {
    return new UpstreamError(`${where} did not answer within ${context.timeoutMs / 1000} s`, {
      code: 'UPSTREAM_TIMEOUT',
      hint: 'check that the service is up and reachable; retry later',
      cause: error,
    });
  }
  const tlsCode = codes.find((c) => c.startsWith('ERR_SSL_') || c.startsWith('ERR_TLS_') || UNTRUSTED_SERVER.has(c));
  if (tlsCode || /certificate required|handshake|alert|tlsv1|ssl3?_/i.test(text)) {
    const all = `${codes.join(' ')} ${text}`.toUpperCase();
    let message: string;
    let hint: string;
    if (/CERTIFICATE_REQUIRED|CERTIFICATE REQUIRED|HANDSHAKE_FAILURE|CLOSED_AFTER_HANDSHAKE/.test(all) && !context.clientCertificate) {
      message = `TLS handshake with ${where} failed: the server requires a client certificate (mutual TLS) and none was presented`;
      hint = `set ${settings.cert} and ${settings.key} to the certificate and private key from the console (file paths or PEM text)`;
    } else if (/UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_UNKNOWN|ACCESS_DENIED|HANDSHAKE_FAILURE|CLOSED_AFTER_HANDSHAKE/.test(all)) {
      message = `TLS handshake with ${where} failed: the server rejected the client certificate`;
      hint = `check that ${settings.cert} and ${settings.key} are a pair registered in the console and not expired (\`miniapp doctor\`)`;
    } else if (tlsCode && UNTRUSTED_SERVER.has(tlsCode)) {
      message = `TLS handshake with ${where} failed: the server's certificate is not trusted (${tlsCode})`;
      hint = `set ${settings.ca} to the CA that signed the server's certificate`;
    } else {
      message = `TLS handshake with ${where} failed (${tlsCode ?? links.at(-1)?.message ?? 'unknown reason'})`;
      hint = 'check the URL scheme (http or https) and the certificates (`miniapp doctor`)';
    }
    return new UpstreamError(message, { code: 'UPSTREAM_TLS', hint, cause: error });
  }
  const networkCode = codes.find((c) => NETWORK_CODES.has(c));
  if (networkCode || links.some((e) => e.name === 'SocketError')) {
    return new UpstreamError(`cannot reach ${where}: ${networkCode ?? links.at(-1)?.message}`, {
      code: 'UPSTREAM_UNREACHABLE',
      hint: networkCode === 'ECONNREFUSED' ? 'nothing listens there: is the service (or `miniapp sandbox`) running?' : 'check the URL and the network',
      cause: error,
    });
  }
  return new UpstreamError(`the request to ${where} failed: ${links.at(-1)?.message ?? String(error)}`, {
    code: 'UPSTREAM_FAILURE',
    cause: error,
  });
}

/**
 * With TLS 1.3 a server refuses a client certificate only after the
 * handshake, and undici then reports just "other side closed". When that
 * happens on an https URL, one bare TLS connection with the same
 * credentials recovers the alert the server sent, so the message can say
 * what really went wrong. Returns undefined when the probe learns nothing.
 */
export async function explainTlsFailure(
  error: unknown,
  url: string,
  tls: { cert?: string | undefined; key?: string | undefined; ca?: string | undefined },
  timeoutMs: number,
): Promise<Error | undefined> {
  const codes = chain(error).map((e) => e.code);
  if (!url.startsWith('https:') || !codes.some((c) => c === 'UND_ERR_SOCKET' || c === 'ECONNRESET')) return undefined;
  const { connect } = await import('node:tls');
  const { isIP } = await import('node:net');
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({
      host,
      port: Number(target.port || 443),
      ...(isIP(host) ? {} : { servername: host }),
      ...(tls.cert ? { cert: tls.cert } : {}),
      ...(tls.key ? { key: tls.key } : {}),
      ...(tls.ca ? { ca: tls.ca } : {}),
      ALPNProtocols: ['http/1.1'],
    });
    const finish = (found?: Error) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(found);
    };
    const timer = setTimeout(() => finish(), Math.min(timeoutMs, 5_000));
    let handshaken = false;
    socket.once('error', (problem) => finish(problem));
    socket.once('secureConnect', () => {
      handshaken = true;
      socket.write(`HEAD / HTTP/1.1\r\nHost: ${target.host}\r\nConnection: close\r\n\r\n`);
    });
    socket.once('data', () => finish());
    // A server that drops the connection right after the handshake, without a word or an
    // alert, is refusing the client (Node's own TLS servers do this for a certificate
    // from an unknown CA).
    socket.once('close', () =>
      finish(
        handshaken ? Object.assign(new Error('the server closed the connection right after the TLS handshake'), { code: CLOSED_AFTER_HANDSHAKE }) : undefined,
      ),
    );
  });
}
