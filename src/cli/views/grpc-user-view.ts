/**
 * How a user of the gRPC user service (user.v1 User) prints: `--json` with
 * the proto's field names, the id as a number and created_at in ISO 8601;
 * the same fields as table columns otherwise.
 */
import type { Column, Output } from '../render/output.js';
import type { Timestamp, UserMessage } from '../../users/proto.js';

export function isoOf(ts: Timestamp | null | undefined): string | null {
  if (!ts) return null;
  const ms = Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1_000_000);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}

/** A user as `--json` prints it. */
export interface UserJson {
  id: number | string;
  username: string;
  email: string;
  full_name: string;
  is_active: boolean;
  roles: string[];
  created_at: string | null;
}

export function userJson(user: UserMessage): UserJson {
  const id = Number(user.id);
  return {
    id: Number.isSafeInteger(id) ? id : user.id,
    username: user.username,
    email: user.email,
    full_name: user.full_name,
    is_active: user.is_active,
    roles: [...(user.roles ?? [])],
    created_at: isoOf(user.created_at),
  };
}

/**
 * On a narrow terminal the full name gives way first (then goes), created_at
 * goes before it, and an empty roles column is left out; the id, username and
 * e-mail (identifiers people copy) stay whole.
 */
export const USER_COLUMNS: readonly Column<UserJson>[] = [
  { header: 'id', value: (u) => u.id },
  { header: 'username', value: (u) => u.username, drop: -1 },
  { header: 'email', value: (u) => u.email, drop: -1 },
  { header: 'full_name', value: (u) => u.full_name, maxWidth: 30 },
  { header: 'active', value: (u) => u.is_active },
  { header: 'roles', value: (u) => u.roles.join(',') },
  { header: 'created_at', value: (u) => u.created_at, drop: 3 },
];

/** One user as field/value pairs (a table on a terminal, TSV when piped, the object with --json). */
export function printUser(out: Output, user: UserMessage): void {
  const json = userJson(user);
  out.record(
    USER_COLUMNS.map((column) => [column.header, column.value(json)] as const),
    json,
  );
}
