/**
 * A user as the store keeps it (user-store.ts) and the change log records
 * it (change-log.ts): the one shape both speak, below them.
 */
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
