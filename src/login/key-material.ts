/**
 * Decoding of the decryption key and AAD.
 *
 * The spec writes both as hex; the vendor's example code reads the key as
 * Base64 and the AAD as text, and integrators mix them up. A 32-byte key is 64 hex or 44 Base64
 * characters, so the encoding is told apart by length. A key that does not
 * decode to 32 bytes is a configuration error of its own, never a
 * "MAC check failed" later on. Messages never contain the key.
 */
import { ConfigError } from '../errors.js';

const KEY_BYTES = 32;

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
  "an AES-256 key is 32 bytes: 64 hex characters (as the spec writes it) or 44 Base64 characters (as the vendor's example reads it); " +
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

/** "1 byte", "32 bytes". */
function bytesOf(count: number): string {
  return `${count} byte${count === 1 ? '' : 's'}`;
}

/** Says what the key looked like, with lengths only. */
function describeKey(value: string): string {
  if (HEX.test(value)) {
    return value.length % 2 === 0
      ? `it is ${value.length} hex characters, which is ${bytesOf(value.length / 2)}`
      : `it is ${value.length} hex characters, an odd number`;
  }
  if (BASE64.test(value) || BASE64URL.test(value)) {
    const bytes = Buffer.from(value, BASE64.test(value) ? 'base64' : 'base64url').length;
    return `it is ${value.length} Base64 characters, which is ${bytesOf(bytes)}`;
  }
  return `it is ${value.length} characters and neither hex nor Base64`;
}

/**
 * The AAD as configured. The spec issues it as hex; the vendor's documentation and code use the bytes of a text
 * (`AAD_STRING=TOSS`, Kotlin `"TOSS".toByteArray()`, `Buffer.from(aad)`). Written `text:TOSS` or `hex:544f5353` it
 * is read as it says; a bare value is hex when it is hex digits of even length (the spec's form, so existing
 * settings keep working), else text.
 */
export interface AadMaterial {
  bytes: Buffer;
  encoding: 'hex' | 'text';
  /** Whether the value named its form (`text:` or `hex:`) rather than leaving it to the bare-value rule. */
  explicit: boolean;
  /** The value without its form prefix. */
  body: string;
}

const AAD_HINT =
  "write the AAD as text:VALUE (the bytes of the text, as the vendor's example reads AAD_STRING) or hex:HEX; a bare value " +
  'is hex when it is hex digits of even length, else text. Set it with --aad, MINIAPP_DECRYPT_AAD or `miniapp config set decrypt-aad VALUE`';

/** Whether a value is whole bytes of hex. */
function isHex(value: string): boolean {
  return HEX.test(value) && value.length % 2 === 0;
}

export function parseAad(text: string): AadMaterial {
  const value = clean(text);
  if (!value) throw new ConfigError('the decrypt AAD is empty', { hint: AAD_HINT });
  const form = /^(text|hex):/i.exec(value)?.[1]?.toLowerCase();
  const body = form ? value.slice(form.length + 1) : value;
  if (form && !body) throw new ConfigError(`the decrypt AAD is empty after "${form}:"`, { hint: AAD_HINT });
  if (form === 'text') return { bytes: Buffer.from(body, 'utf8'), encoding: 'text', explicit: true, body };
  if (form === 'hex') {
    if (!HEX.test(body))
      throw new ConfigError(`the decrypt AAD after "hex:" must be hex digits; it is ${body.length} characters, not all of them hex digits`, { hint: AAD_HINT });
    if (body.length % 2 !== 0)
      throw new ConfigError(`the decrypt AAD after "hex:" must be whole bytes of hex; it is ${body.length} characters, an odd number`, { hint: AAD_HINT });
    return { bytes: Buffer.from(body, 'hex'), encoding: 'hex', explicit: true, body };
  }
  if (isHex(body)) return { bytes: Buffer.from(body, 'hex'), encoding: 'hex', explicit: false, body };
  return { bytes: Buffer.from(body, 'utf8'), encoding: 'text', explicit: false, body };
}

/** How an AAD reads, in words (doctor, hints): never the value. */
export function describeAad(aad: AadMaterial): string {
  const how = aad.encoding === 'hex' ? 'hex' : 'text';
  return `${bytesOf(aad.bytes.length)}, read as ${how}${aad.explicit ? ` (written ${how}:)` : aad.encoding === 'hex' ? ' (a bare value of hex digits; write text:... if it is a text)' : ' (a bare value that is not hex)'}`;
}

/** Another reading of the configured AAD, and the setting that selects it. */
export interface AadReading {
  bytes: Buffer;
  /** The decrypt-aad value that reads the AAD this way, e.g. `text:544f5353`. */
  setting: string;
  /** The setting's form without the value, for places that must not show it (the relay's log): `text:...`. */
  form: string;
  explanation: string;
}

/**
 * The readings integrators mix up, other than the one in use: the same characters as text rather than hex (or the
 * reverse), and a Base64 AAD. Tried after a tag mismatch; the first that verifies is the setting to use.
 */
export function otherAadReadings(aad: AadMaterial): AadReading[] {
  const readings: AadReading[] = [];
  const { body } = aad;
  if (aad.encoding === 'hex') {
    readings.push({
      bytes: Buffer.from(body, 'utf8'),
      setting: `text:${body}`,
      form: 'text:...',
      explanation: 'the values verify when the AAD is the bytes of its text, not decoded from hex',
    });
  } else if (isHex(body)) {
    readings.push({
      bytes: Buffer.from(body, 'hex'),
      setting: `hex:${body}`,
      form: 'hex:...',
      explanation: 'the values verify when the AAD is decoded from hex, not read as text',
    });
  }
  if (BASE64.test(body) && body.length % 4 === 0) {
    const decoded = Buffer.from(body, 'base64');
    readings.push({
      bytes: decoded,
      setting: `hex:${decoded.toString('hex')}`,
      form: 'hex:...',
      explanation: 'the values verify when the AAD is decoded from Base64',
    });
  }
  return readings.filter((reading) => reading.bytes.length > 0 && !reading.bytes.equals(aad.bytes));
}
