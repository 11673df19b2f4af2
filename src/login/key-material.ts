/**
 * Decoding of the decryption key and AAD as issued by the console.
 *
 * The spec issues both as hex; vendor sample code reads the key as Base64,
 * and integrators mix the two up. A 32-byte key is 64 hex or 44 Base64
 * characters, so the encoding is told apart by length. A key that does not
 * decode to 32 bytes is a configuration error of its own, never a
 * "MAC check failed" later on. Messages never contain the key.
 */
import { ConfigError } from '../errors.js';

export const KEY_BYTES = 32;

export interface KeyMaterial {
  bytes: Buffer;
  encoding: 'hex' | 'base64';
}

const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

/** Trims whitespace, a trailing newline from a key file, and matching quotes from a pasted value. */
function clean(text: string): string {
  const trimmed = text.trim();
  const quoted = /^(["'])(.*)\1$/s.exec(trimmed);
  return (quoted ? quoted[2]! : trimmed).trim();
}

const KEY_HINT =
  'an AES-256 key is 32 bytes: 64 hex or 44 Base64 characters, as issued by the console; ' +
  'set it with --key, MINIAPP_DECRYPT_KEY or `miniapp config set decrypt-key KEY`';

export function parseKey(text: string): KeyMaterial {
  const value = clean(text);
  if (!value) throw new ConfigError('the decrypt key is empty', { hint: KEY_HINT });
  if (HEX.test(value) && value.length === 64) return { bytes: Buffer.from(value, 'hex'), encoding: 'hex' };
  if (BASE64.test(value) || BASE64URL.test(value)) {
    const bytes = Buffer.from(value, BASE64.test(value) ? 'base64' : 'base64url');
    if (bytes.length === KEY_BYTES && !HEX.test(value)) return { bytes, encoding: 'base64' };
  }
  throw new ConfigError(`the decrypt key does not decode to ${KEY_BYTES} bytes: ${describeKey(value)}`, {
    hint: KEY_HINT,
  });
}

/** Says what the key looked like, with lengths only. */
function describeKey(value: string): string {
  if (HEX.test(value)) {
    return value.length % 2 === 0
      ? `it is ${value.length} hex characters, which is ${value.length / 2} bytes`
      : `it is ${value.length} hex characters, an odd number`;
  }
  if (BASE64.test(value) || BASE64URL.test(value)) {
    const bytes = Buffer.from(value, BASE64.test(value) ? 'base64' : 'base64url').length;
    return `it is ${value.length} Base64 characters, which is ${bytes} bytes`;
  }
  return `it is ${value.length} characters and neither hex nor Base64`;
}

export function parseAad(text: string): KeyMaterial {
  const value = clean(text);
  const hint =
    'the console issues the AAD as hex; set it with --aad, MINIAPP_DECRYPT_AAD or `miniapp config set decrypt-aad HEX`';
  if (!value) throw new ConfigError('the decrypt AAD is empty', { hint });
  if (!HEX.test(value)) {
    throw new ConfigError(`the decrypt AAD must be hex; it is ${value.length} characters, not all of them hex digits`, { hint });
  }
  if (value.length % 2 !== 0) {
    throw new ConfigError(`the decrypt AAD must be whole bytes of hex; it is ${value.length} characters, an odd number`, { hint });
  }
  return { bytes: Buffer.from(value, 'hex'), encoding: 'hex' };
}
