/**
 * A user as the store keeps it (user-store.ts, user-search.ts) and the
 * change log records it (change-log.ts): the one shape they all speak,
 * below them, with the row it is read from.
 */
/** The kinds of change a watch reports (user.v1 EventType), in the proto's order. */
export const EVENT_TYPES = ['CREATED', 'UPDATED', 'DELETED'] as const;
export type EventTypeName = (typeof EVENT_TYPES)[number];

export interface UserRecord {
  id: number;
  username: string;
  email: string;
  fullName: string;
  isActive: boolean;
  roles: string[];
  createdAt: string;
  updatedAt: string;
  bio: string | null;
  avatarUrl: string | null;
}

/** A row of `users` as either engine returns it (USER_COLUMNS). */
export interface UserRow {
  id: number;
  username: string;
  email: string;
  full_name: string;
  /** 0 or 1 from SQLite, a boolean from PostgreSQL. */
  is_active: number | boolean;
  roles: string;
  created_at: string;
  updated_at: string;
  bio: string | null;
  avatar_url: string | null;
}

/** The columns of a UserRow, in a statement's select list. */
export const USER_COLUMNS = 'id, username, email, full_name, is_active, roles, created_at, updated_at, bio, avatar_url';

export function toRecord(row: UserRow): UserRecord {
  return {
    id: Number(row.id),
    username: row.username,
    email: row.email,
    fullName: row.full_name,
    isActive: row.is_active === true || row.is_active === 1,
    roles: JSON.parse(row.roles) as string[],
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    bio: row.bio,
    avatarUrl: row.avatar_url,
  };
}
