/**
 * What several commands build from the active profile: the decryption key
 * and AAD, the partner-API client, the token store. One place, so `decrypt`,
 * `me`, `doctor` and the relay read settings the same way.
 */
import { Option } from '../commander.js';
import { ConfigError, UsageError } from '../../errors.js';
import { parseDuration } from '../../duration.js';
import { parseAad, parseKey, type AadMaterial, type KeyMaterial } from '../../login/key-material.js';
import type { CommandContext } from '../context.js';
import type { ClientTls, PartnerClient } from '../../login/partner-client.js';
import type { TokenStore } from '../../login/session.js';

export interface DecryptMaterial {
  key: KeyMaterial;
  aad: AadMaterial;
}

/** Names the flag when a flag's value is what failed, since Settings only names env and profile. */
function fromFlag<T>(parse: () => T, flag: string | undefined): T {
  try {
    return parse();
  } catch (error) {
    if (flag && error instanceof ConfigError) throw new ConfigError(`${flag}: ${error.message}`, { hint: error.hint });
    throw error;
  }
}

/** Key and AAD from flags, then the environment, then the profile. */
export async function decryptMaterial(cc: CommandContext, flags: { key?: string; aad?: string } = {}): Promise<DecryptMaterial> {
  const keyText = flags.key ?? (await cc.settings.require('decrypt-key', '--key'));
  const aadText = flags.aad ?? (await cc.settings.require('decrypt-aad', '--aad'));
  return {
    key: fromFlag(() => parseKey(keyText), flags.key === undefined ? undefined : '--key'),
    aad: fromFlag(() => parseAad(aadText), flags.aad === undefined ? undefined : '--aad'),
  };
}

export function timeoutOption(): Option {
  return new Option('--timeout <duration>', 'time-out of each call to the partner API').default('10s');
}

export function timeoutMs(value: string | undefined): number {
  const ms = parseDuration(value ?? '10s', '--timeout');
  if (ms <= 0) throw new UsageError('--timeout must be longer than 0');
  return ms;
}

/**
 * The profile's client certificate, key and CA as PEM text (each setting may
 * be a path or PEM). Both halves of the pair or neither.
 */
export async function partnerTls(cc: CommandContext): Promise<ClientTls> {
  const { readPem } = await import('../../login/pem.js');
  const [cert, key, ca] = await Promise.all(['mtls-cert', 'mtls-key', 'mtls-ca'].map((name) => cc.settings.get(name)));
  if (Boolean(cert!.value) !== Boolean(key!.value)) {
    throw new ConfigError('mutual TLS needs both mtls-cert and mtls-key; only one is set', {
      hint: 'set both (file paths or PEM text), or unset the other',
    });
  }
  const pem = (value: string | undefined, name: string) => (value ? readPem(value, name) : undefined);
  return { cert: pem(cert!.value, 'mtls-cert'), key: pem(key!.value, 'mtls-key'), ca: pem(ca!.value, 'mtls-ca') };
}

/** The partner client for the profile: base-url + path-prefix, mutual TLS when configured. */
export async function partnerClient(cc: CommandContext, options: { timeout?: string; pathPrefix?: string | undefined } = {}): Promise<PartnerClient> {
  const { PartnerClient } = await import('../../login/partner-client.js');
  const baseUrl = await cc.settings.get('base-url');
  if (!baseUrl.value) {
    throw new ConfigError(`base-url is not set in profile "${cc.profile}"`, {
      hint:
        'set the partner API URL with `miniapp config set base-url URL` or MINIAPP_BASE_URL; ' +
        'for an offline sandbox, run `miniapp sandbox` and use the URL it prints',
    });
  }
  return new PartnerClient({
    baseUrl: baseUrl.value,
    pathPrefix: options.pathPrefix ?? (await cc.settings.get('path-prefix')).value,
    timeoutMs: timeoutMs(options.timeout),
    tls: await partnerTls(cc),
  });
}

export async function tokenStore(cc: CommandContext): Promise<TokenStore> {
  const { profileTokenStore } = await import('../../config/token-store.js');
  return profileTokenStore(cc.settings.file(), () => cc.settings.store(), cc.profile);
}
