/** How a (decrypted) UserInfo is shown: field/value pairs, arrays joined, the object itself with --json. */
import type { Output } from '../render/output.js';

export function printUserInfo(out: Output, user: Record<string, unknown>): void {
  out.record(
    Object.entries(user).map(([field, value]) => [field, Array.isArray(value) ? value.join(', ') : value] as const),
    user,
  );
}
