/**
 * Who sees which fields of whom in user.v1 (the README's authorization
 * table says the same in prose). A user token sees its own record whole and
 * of everyone else the public fields only: id, username and full name (the
 * blog shows them beside every post). E-mail, roles, active state and when
 * the account was made are the person's and the operators': the admin
 * token, or a user with the `admin` role, sees them of everyone.
 */
import type { Principal } from '../auth/tokens.js';
import { userMessage, type UserMessage } from './proto.js';
import type { UserRecord } from './user-store.js';

/** Whether `viewer` sees every field of `user`: its own record, or any with the admin role. */
export function seesWhole(viewer: Principal, userId: number): boolean {
  return viewer.isAdmin || viewer.userId === userId;
}

/** `user` as `viewer` may see it: whole, or the public fields with the others at their proto3 defaults. */
export function userFor(viewer: Principal, user: UserRecord): UserMessage {
  const message = userMessage(user);
  if (seesWhole(viewer, user.id)) return message;
  return { id: message.id, username: message.username, email: '', full_name: message.full_name, is_active: false, roles: [], created_at: null };
}

/** Whether a ListUsers filter may match e-mail addresses: only for those who see everyone's. */
export function searchesEmails(viewer: Principal): boolean {
  return viewer.isAdmin;
}

/** Whether WatchUserChanges may follow other users than the caller: their whole records go out. */
export function watchesEveryone(viewer: Principal): boolean {
  return viewer.isAdmin;
}
