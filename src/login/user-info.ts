/**
 * The UserInfo of login-me: which fields are encrypted, how to find it in
 * any of the shapes people hold (the whole envelope, its `success` object,
 * or the bare object), and field-by-field decryption that attempts every
 * field and reports all failures at once. The decrypted user's scope is
 * space-separated, as the spec writes it, whichever separator came.
 */
import { isJsonObject } from '../json-syntax.js';
import { DecryptError, MiniappError, UsageError } from '../errors.js';
import { decryptField, diagnoseTagMismatch, encryptField, FieldDecryptionError, type FieldFailureReason } from './field-cipher.js';
import type { AadMaterial, KeyMaterial } from './key-material.js';
import { splitScopes } from './token-data.js';

const ENCRYPTED_FIELDS = ['name', 'phone', 'birthday', 'ci', 'di', 'gender', 'nationality', 'email'] as const;
type EncryptedField = (typeof ENCRYPTED_FIELDS)[number];

/** Absent, empty, JSON null and the literal text "null" are not decrypted (spec rule 5). */
function isEmptyField(value: unknown): boolean {
  return value === undefined || value === null || value === '' || value === 'null';
}

/** Finds the UserInfo in an envelope, a `success` object or a bare UserInfo. */
export function unwrapUserInfo(payload: unknown): Record<string, unknown> {
  if (!isJsonObject(payload)) {
    throw new UsageError('the input is not a login-me response: expected a JSON object');
  }
  if (payload.resultType === 'FAIL') {
    const error = isJsonObject(payload.error) ? payload.error : {};
    throw new MiniappError(
      `the input is a FAIL envelope, not user information: ${String(error.errorCode ?? 'no errorCode')}: ${String(error.reason ?? 'no reason')}`,
    );
  }
  const info = isJsonObject(payload.success) ? payload.success : payload;
  const known = ['userKey', ...ENCRYPTED_FIELDS].some((field) => field in info);
  if (!known) {
    throw new UsageError('the input holds no userKey and no encrypted field; is it a login-me response?', {
      hint: 'accepted shapes: the whole response { resultType, success }, its success object, or a bare UserInfo',
    });
  }
  return info;
}

interface FieldFailure {
  field: string;
  reason: FieldFailureReason;
}

export interface DecryptOutcome {
  /** The input with every decryptable field replaced by its plaintext; other fields unchanged. */
  user: Record<string, unknown>;
  decrypted: EncryptedField[];
  failed: FieldFailure[];
}

export function decryptUserInfo(info: Record<string, unknown>, key: Buffer, aad: Buffer): DecryptOutcome {
  const user: Record<string, unknown> = { ...info };
  // Scopes as the spec writes them (space-separated), whether the API joined them with spaces or commas.
  if (typeof info.scope === 'string') user.scope = splitScopes(info.scope).join(' ');
  const decrypted: EncryptedField[] = [];
  const failed: FieldFailure[] = [];
  for (const field of ENCRYPTED_FIELDS) {
    if (!(field in info)) continue;
    const value = info[field];
    if (isEmptyField(value)) {
      user[field] = value === 'null' ? null : value;
      continue;
    }
    try {
      user[field] = decryptField(value, key, aad);
      decrypted.push(field);
    } catch (error) {
      if (!(error instanceof FieldDecryptionError)) throw error;
      failed.push({ field, reason: error.reason });
    }
  }
  return { user, decrypted, failed };
}

/** The inverse, for the sandbox and tests: every non-empty personal field encrypted. */
export function encryptUserInfo(info: Record<string, unknown>, key: Buffer, aad: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = { ...info };
  for (const field of ENCRYPTED_FIELDS) {
    const value = info[field];
    if (!isEmptyField(value)) out[field] = encryptField(String(value), key, aad);
  }
  return out;
}

/**
 * Builds the one error a user sees when fields fail: which fields, and the
 * likely causes ranked by what the other fields tell us. When another
 * reading of the AAD makes them verify, it names the setting to use: in
 * full where the reader is the one who configured it (`decrypt`, `me`), by
 * its form only where the message is logged (`showAad: false`, the relay).
 */
export function decryptionError(
  outcome: DecryptOutcome,
  info: Record<string, unknown>,
  material: { key: KeyMaterial; aad: AadMaterial },
  options: { showAad?: boolean } = {},
): DecryptError {
  const names = outcome.failed.map((f) => f.field);
  const mismatched = outcome.failed.filter((f) => f.reason === 'tag-mismatch');
  const malformed = outcome.failed.filter((f) => f.reason !== 'tag-mismatch');
  let message = `could not decrypt ${names.length} of ${names.length + outcome.decrypted.length} encrypted fields: ${names.join(', ')}`;
  const causes: string[] = [];
  let next = 'check decrypt-key and decrypt-aad with `miniapp config list` (values stay masked)';
  if (malformed.length > 0) {
    causes.push(
      `${malformed.map((f) => `${f.field} (${REASONS[f.reason]})`).join(', ')}: not an encrypted value, which is Base64 of IV(12) + ciphertext + tag(16)`,
    );
  }
  if (mismatched.length > 0) {
    const first = mismatched[0]!;
    const diagnosis = diagnoseTagMismatch(info[first.field], material.key.bytes, material.aad);
    if (diagnosis?.reading) {
      const { reading } = diagnosis;
      const how = material.aad.encoding === 'hex' ? 'hex' : 'text';
      message += `: the AAD is read as ${how}, and ${reading.explanation.replace(/^the values /, 'they ')}`;
      const setting = options.showAad ? reading.setting : reading.form;
      causes.push(`set the AAD as ${options.showAad ? '' : 'the same value, written '}${setting}`);
      next = options.showAad
        ? `miniapp config set decrypt-aad ${setting}   (or MINIAPP_DECRYPT_AAD=${setting}, or --aad ${setting})`
        : `miniapp config set decrypt-aad ${setting}   (the AAD you have, written ${reading.form.replace('...', '')}VALUE; or MINIAPP_DECRYPT_AAD)`;
    } else if (diagnosis) {
      causes.push(diagnosis.explanation);
    } else if (outcome.decrypted.length > 0) {
      causes.push(
        `${mismatched.map((f) => f.field).join(', ')} failed the tag check while the same key and AAD decrypted ${outcome.decrypted.join(', ')}: those values were altered or truncated after encryption`,
      );
    } else {
      causes.push(
        'the authentication tag check failed (MAC check failed). Likely causes: a wrong decrypt key; a wrong AAD ' +
          `(it is read as ${material.aad.encoding === 'hex' ? 'hex' : 'text'}: write text:VALUE or hex:HEX to say which); ` +
          `a key in the wrong encoding (it was read as ${material.key.encoding === 'hex' ? 'hex' : 'Base64'}); ` +
          'or values sliced other than IV(12) + ciphertext + tag(16)',
      );
    }
  }
  return new DecryptError(message, names, { hint: `${causes.join('\n')}\n${next}` });
}

const REASONS: Record<FieldFailureReason, string> = {
  'not-base64': 'not Base64',
  'too-short': 'shorter than 28 bytes',
  'tag-mismatch': 'tag check failed',
  'not-utf8': 'plaintext is not UTF-8',
  'not-a-string': 'not a string',
};
