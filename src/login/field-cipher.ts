/**
 * AES-256-GCM for the personal fields of login-me (spec 000, "Encrypted
 * field format"): Base64 of IV (12 bytes) + ciphertext + tag (16 bytes),
 * UTF-8 plaintext, AAD applied. Both directions: the client decrypts, the
 * sandbox encrypts.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { otherAadReadings, type AadMaterial, type AadReading } from './key-material.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;

export type FieldFailureReason = 'not-base64' | 'too-short' | 'tag-mismatch' | 'not-utf8' | 'not-a-string';

export class FieldDecryptionError extends Error {
  constructor(readonly reason: FieldFailureReason) {
    super(`field decryption failed: ${reason}`);
    this.name = 'FieldDecryptionError';
  }
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

export function encryptField(plaintext: string, key: Buffer, aad: Buffer, iv: Buffer = randomBytes(IV_BYTES)): string {
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
}

function decodeValue(value: unknown): Buffer {
  if (typeof value !== 'string') throw new FieldDecryptionError('not-a-string');
  const compact = value.replace(/\s+/g, '');
  if (!BASE64.test(compact)) throw new FieldDecryptionError('not-base64');
  const bytes = Buffer.from(compact, compact.includes('-') || compact.includes('_') ? 'base64url' : 'base64');
  if (bytes.length < IV_BYTES + TAG_BYTES) throw new FieldDecryptionError('too-short');
  return bytes;
}

type Layout = 'iv-ciphertext-tag' | 'iv-tag-ciphertext';

function open(bytes: Buffer, key: Buffer, aad: Buffer, layout: Layout = 'iv-ciphertext-tag'): Buffer | undefined {
  const iv = bytes.subarray(0, IV_BYTES);
  const [body, tag] =
    layout === 'iv-ciphertext-tag'
      ? [bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES), bytes.subarray(bytes.length - TAG_BYTES)]
      : [bytes.subarray(IV_BYTES + TAG_BYTES), bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES)];
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    return undefined;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decryptField(value: unknown, key: Buffer, aad: Buffer): string {
  const plain = open(decodeValue(value), key, aad);
  if (!plain) throw new FieldDecryptionError('tag-mismatch');
  try {
    return utf8.decode(plain);
  } catch {
    throw new FieldDecryptionError('not-utf8');
  }
}

export interface TagDiagnosis {
  explanation: string;
  /** The AAD reading that makes the value verify, when that is what was wrong. */
  reading?: AadReading;
}

/**
 * After a tag mismatch, tries the mix-ups integrators make most (the AAD
 * read as text rather than hex or the reverse, or Base64; tag and
 * ciphertext swapped) and says which one makes the value verify. Returns
 * undefined when none does.
 */
export function diagnoseTagMismatch(value: unknown, key: Buffer, aad: AadMaterial): TagDiagnosis | undefined {
  let bytes: Buffer;
  try {
    bytes = decodeValue(value);
  } catch {
    return undefined;
  }
  for (const reading of otherAadReadings(aad)) {
    if (open(bytes, key, reading.bytes)) return { explanation: reading.explanation, reading };
  }
  if (open(bytes, key, aad.bytes, 'iv-tag-ciphertext')) {
    return {
      explanation:
        "the values verify when read as IV + tag + ciphertext; the spec's layout is IV(12) + ciphertext + tag(16), so the producer sliced them differently",
    };
  }
  return undefined;
}
