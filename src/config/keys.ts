/**
 * The catalogue of settings: their names, the environment variables that
 * override them, defaults, which are secrets, and how a value is checked
 * before it is stored.
 */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import { parseAad, parseKey } from '../login/key-material.js';
import { DEFAULT_PARTNER_PREFIX, PARTNER_PREFIXES, resolvePartnerPrefix } from '../login/partner-prefix.js';

export interface SettingSpec {
  readonly key: string;
  readonly env: string;
  readonly description: string;
  readonly default?: string;
  /** Masked in listings; shown only on an explicit `--reveal`. */
  readonly secret?: boolean;
  /** A credential: when it is missing, that is an authentication failure (exit 4), not a configuration error. */
  readonly credential?: boolean;
  /** Where a value comes from, added to the message when it is missing. */
  readonly whereToGet?: string;
  /** Throws ConfigError for a value that cannot work; returns the value to store. */
  readonly validate: (value: string) => string;
}

function httpUrl(key: string) {
  return (value: string): string => {
    let url: URL;
    try {
      url = new URL(value.trim());
    } catch {
      throw new ConfigError(`${key} must be an absolute URL such as https://api.example.com; got "${value}"`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ConfigError(`${key} must be an http or https URL; got ${url.protocol.replace(':', '')}`);
    }
    if (url.search || url.hash) throw new ConfigError(`${key} must not carry a query or fragment; got "${value}"`);
    return url.href.replace(/\/+$/, '');
  };
}

/** A certificate, key or CA bundle: a readable file path or the PEM text itself. */
function pem(key: string, label: RegExp, expected: string) {
  return (value: string): string => {
    const trimmed = value.trim();
    if (trimmed.startsWith('-----BEGIN')) {
      if (!label.test(trimmed) || !/-----END [A-Z ]+-----/.test(trimmed)) {
        throw new ConfigError(`${key} holds PEM text of the wrong kind or an incomplete PEM block`, {
          hint: `expected a block starting with "-----BEGIN ${expected}-----"`,
        });
      }
      return `${trimmed}\n`;
    }
    // Stored absolute: the file is found again from any directory.
    const path = resolve(trimmed);
    if (!existsSync(path) || !statSync(path).isFile()) {
      throw new ConfigError(`${key}: no file at ${path}`, {
        hint: 'give the path of a PEM file, or the PEM text itself (starting with -----BEGIN)',
      });
    }
    return path;
  };
}

function nonEmpty(key: string) {
  return (value: string): string => {
    const trimmed = value.trim();
    if (!trimmed) throw new ConfigError(`${key} must not be empty`);
    return trimmed;
  };
}

function databaseUrl(value: string): string {
  const trimmed = value.trim();
  let url: URL | undefined;
  try {
    url = new URL(trimmed);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || !url.hostname) {
    // Never echo the value: it may hold a password.
    throw new ConfigError(
      'database-url must be a postgres:// or postgresql:// URL with a host, such as postgres://miniapp:PASSWORD@db.example.com:5432/miniapp',
    );
  }
  return trimmed;
}

function hostPort(value: string): string {
  const trimmed = value.trim();
  const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(trimmed);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port < 1 || port > 65535) {
    throw new ConfigError(`grpc-addr must be HOST:PORT with a port from 1 to 65535; got "${value}"`);
  }
  return trimmed;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----/;
const PEM_KEY = /-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----/;

export const SETTINGS: readonly SettingSpec[] = [
  { key: 'base-url', env: 'MINIAPP_BASE_URL', description: 'partner API base URL', validate: httpUrl('base-url') },
  {
    key: 'path-prefix',
    env: 'MINIAPP_PATH_PREFIX',
    description: `path of the partner API under base-url: spec (${PARTNER_PREFIXES.spec}), production (${PARTNER_PREFIXES.production}), or a path`,
    default: DEFAULT_PARTNER_PREFIX,
    validate: (value) => resolvePartnerPrefix(value),
  },
  {
    key: 'decrypt-key',
    env: 'MINIAPP_DECRYPT_KEY',
    description: 'AES-256 key: 64 hex or 44 Base64 characters',
    secret: true,
    validate: (value) => {
      parseKey(value);
      return value.trim();
    },
  },
  {
    key: 'decrypt-aad',
    env: 'MINIAPP_DECRYPT_AAD',
    description: 'additional authenticated data (AAD): text:VALUE, hex:HEX, or bare (hex when it is hex digits of even length, else text)',
    secret: true,
    validate: (value) => {
      parseAad(value);
      return value.trim();
    },
  },
  { key: 'mtls-cert', env: 'MINIAPP_MTLS_CERT', description: 'client certificate: file path or PEM text', validate: pem('mtls-cert', PEM_CERT, 'CERTIFICATE') },
  {
    key: 'mtls-key',
    env: 'MINIAPP_MTLS_KEY',
    description: 'client private key: file path or PEM text',
    secret: true,
    validate: pem('mtls-key', PEM_KEY, 'PRIVATE KEY'),
  },
  {
    key: 'mtls-ca',
    env: 'MINIAPP_MTLS_CA',
    description: 'CA bundle for the partner API: file path or PEM text',
    validate: pem('mtls-ca', PEM_CERT, 'CERTIFICATE'),
  },
  { key: 'relay-url', env: 'MINIAPP_RELAY_URL', description: 'URL of a running relay', validate: httpUrl('relay-url') },
  {
    key: 'graph-url',
    env: 'MINIAPP_GRAPH_URL',
    description: 'insights graph API base URL',
    default: 'https://graph.facebook.com',
    validate: httpUrl('graph-url'),
  },
  {
    key: 'graph-version',
    env: 'MINIAPP_GRAPH_VERSION',
    description: 'graph API version path segment; empty (""): unversioned paths, served at the app\'s default version',
    default: 'v18.0',
    validate: (value) => {
      const trimmed = value.trim();
      if (trimmed !== '' && !/^v\d+\.\d+$/.test(trimmed)) {
        throw new ConfigError(`graph-version must look like v18.0, or be empty ("") for unversioned paths; got "${value}"`);
      }
      return trimmed;
    },
  },
  {
    key: 'graph-shape',
    env: 'MINIAPP_GRAPH_SHAPE',
    description: 'how insights finds the account: auto, spec (/me/social_business_accounts), facebook (/me/accounts), instagram (/me)',
    default: 'auto',
    validate: (value) => {
      const trimmed = value.trim().toLowerCase();
      if (!['auto', 'spec', 'facebook', 'instagram'].includes(trimmed)) {
        throw new ConfigError(`graph-shape must be auto, spec, facebook or instagram; got "${value}"`);
      }
      return trimmed;
    },
  },
  {
    key: 'graph-token',
    env: 'MINIAPP_GRAPH_TOKEN',
    description: 'graph API access token',
    secret: true,
    credential: true,
    whereToGet: 'a page token from the graph explorer; the sandbox accepts sandbox-graph-token',
    validate: nonEmpty('graph-token'),
  },
  {
    key: 'graph-account',
    env: 'MINIAPP_GRAPH_ACCOUNT',
    description: 'business account ID for insights',
    validate: (value) => {
      const trimmed = value.trim();
      if (!/^[A-Za-z0-9_-]+$/.test(trimmed)) throw new ConfigError(`graph-account must be an account ID; got "${value}"`);
      return trimmed;
    },
  },
  { key: 'grpc-addr', env: 'MINIAPP_GRPC_ADDR', description: 'user service address', default: '127.0.0.1:50051', validate: hostPort },
  {
    key: 'grpc-token',
    env: 'MINIAPP_GRPC_TOKEN',
    description: 'bearer token for the user service',
    secret: true,
    credential: true,
    whereToGet: '`miniapp serve` stores its admin token here',
    validate: nonEmpty('grpc-token'),
  },
  {
    key: 'grpc-tls',
    env: 'MINIAPP_GRPC_TLS',
    description: 'true: connect to the gRPC services with TLS (`miniapp serve --grpc-tls-cert` writes it); grpc-ca implies it',
    validate: (value) => {
      const trimmed = value.trim().toLowerCase();
      if (trimmed !== 'true' && trimmed !== 'false') throw new ConfigError(`grpc-tls must be true or false; got "${value}"`);
      return trimmed;
    },
  },
  {
    key: 'grpc-ca',
    env: 'MINIAPP_GRPC_CA',
    description: 'CA for a TLS user service: file path or PEM text',
    validate: pem('grpc-ca', PEM_CERT, 'CERTIFICATE'),
  },
  {
    key: 'database-url',
    env: 'MINIAPP_DATABASE_URL',
    description: 'PostgreSQL shared by serve instances: postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=...] (secret); unset: SQLite in the data dir',
    secret: true,
    validate: databaseUrl,
  },
];

const byKey = new Map(SETTINGS.map((spec) => [spec.key, spec]));

export function settingSpec(key: string): SettingSpec {
  const spec = byKey.get(key);
  if (!spec) {
    throw new ConfigError(`unknown setting "${key}"`, {
      hint: `valid settings: ${SETTINGS.map((s) => s.key).join(', ')}`,
    });
  }
  return spec;
}

/** Secrets are masked unless they are a path to a file (a path gives nothing away). */
export function isMaskedValue(spec: SettingSpec, value: string): boolean {
  if (!spec.secret) return false;
  return !(spec.key === 'mtls-key' && !value.trimStart().startsWith('-----BEGIN'));
}
