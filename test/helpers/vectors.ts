/**
 * Encrypted-field vectors made directly with node:crypto, independent of
 * the code under test, in the spec's layout: Base64(IV(12) + ciphertext + tag(16)).
 */
import { createCipheriv, randomBytes } from 'node:crypto';

export const KEY_HEX = '603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4';
export const KEY = Buffer.from(KEY_HEX, 'hex');
export const KEY_BASE64 = KEY.toString('base64');
export const AAD_HEX = '7465737461616421'; // "testaad!"
export const AAD = Buffer.from(AAD_HEX, 'hex');

export function seal(plaintext: string, key: Buffer = KEY, aad: Buffer = AAD, iv: Buffer = randomBytes(12)): string {
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
}

export const PLAIN_USER = {
  userKey: 1001,
  scope: 'user_name user_phone user_ci user_key',
  agreedTerms: ['terms_service', 'terms_privacy'],
  name: '김민지',
  phone: '01012345678',
  birthday: '19990131',
  ci: 'Yk9iZ0xQbWtzZGZqa2xzZGZqa2xzZGY=',
  gender: 'FEMALE',
  nationality: 'LOCAL',
  email: 'minji@example.com',
} as const;

/** PLAIN_USER with every personal field sealed, plus a JSON-null di. */
export function sealedUser(key: Buffer = KEY, aad: Buffer = AAD): Record<string, unknown> {
  const out: Record<string, unknown> = { ...PLAIN_USER, di: null };
  for (const field of ['name', 'phone', 'birthday', 'ci', 'gender', 'nationality', 'email'] as const) {
    out[field] = seal(PLAIN_USER[field], key, aad);
  }
  return out;
}

export function envelope(success: unknown): { resultType: 'SUCCESS'; success: unknown } {
  return { resultType: 'SUCCESS', success };
}
