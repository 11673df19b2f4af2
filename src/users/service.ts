/**
 * UserService (user.v1) on grpc-js: the spec's behaviour rules with the
 * issue's improvements (validation naming fields, uniqueness by the
 * database, AIP-134 update masks, AIP-158 paging, scrypt hashes), watch,
 * chat and sync streams that let go of everything when a call ends.
 *
 * The service does not know which database it runs on, nor how many
 * instances share it: changes reach the watchers through the change log
 * (change-log.ts, change-feed.ts), chat messages through the chat hub.
 *
 * Who sees what of whom is visibility.ts's; long streams follow their token
 * as it is now (grpc/call-auth.ts): a stream of a revoked token or of a
 * deactivated or deleted user ends UNAUTHENTICATED, and every message a
 * stream acts on is authorized when it is acted on.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { hashPassword, verifyPassword } from '../auth/passwords.js';
import type { Principal } from '../auth/tokens.js';
import type { CallAuth, OpenStream } from '../grpc/call-auth.js';
import { StreamQuota, type StreamQuotaLimits } from '../grpc/stream-quota.js';
import { failStream as endStream, RpcError, SHUTTING_DOWN, statusName } from '../grpc/status.js';
import { ChatHub } from '../grpc/chat-hub.js';
import { pace } from '../grpc/stream-pace.js';
import type { RequestRates } from '../auth/request-rates.js';
import type { AccountCaller, SignUps } from '../auth/signup-limits.js';
import { addressOf } from '../grpc/request-check.js';
import { createFromStream, type RowStream } from './batch-create.js';
import type { UserChangeFeed } from './change-feed.js';
import { userMessage, UPDATE_PATHS, type BulkCreateFailure, type ChatMessage, type CreateUserRequest, type UserMessage } from './proto.js';
import { listUsers, type ListUsersCall } from './user-list.js';
import { watchUserChanges, type WatchCall } from './user-watch.js';
import { userChat, type ChatCall } from './user-chat.js';
import { REQUEST_LIMITS, toStatus, userIdOf } from './rpc-common.js';
import { userFor } from './visibility.js';
import {
  characters,
  checkEmail,
  checkFullName,
  checkMaxEntries,
  checkMaxLength,
  checkRoles,
  newUserProblems,
  checkUsername,
  checkUnreservedUsername,
  isReservedUsername,
  UserValidationError,
  type NewUser,
  type UserChanges,
  type UserRecord,
  type UserStore,
  USER_LIMITS,
} from './user-store.js';

const { status: Status } = grpc;

/** A row of a bulk create that was not created: the status name it would have had, and why. */
interface BulkRowFailure {
  status: string;
  message: string;
}

/** Open watches: at most this many per account and in all (README, Limits). */
const DEFAULT_WATCH_LIMITS: StreamQuotaLimits = { perAccount: 16, total: 1000 };
/** SyncUsers requests read ahead of their answers; past it the stream is not read until the client reads. */
const SYNC_READ_AHEAD = 64;

interface SyncRequest {
  client_ref: string;
  operation?: 'upsert' | 'delete_user_id';
  upsert?: { user: UserMessage | null; password: string } | null;
  delete_user_id?: string;
}

export interface UserServiceOptions {
  users: UserStore;
  /** The tokens of calls, and the grants of long streams. */
  auth: CallAuth;
  /** Open WatchUserChanges streams per account and in all; DEFAULT_WATCH_LIMITS when not given. */
  watchLimits?: StreamQuotaLimits | undefined;
  /** How long a watcher may read nothing while changes wait for it; stream-outbox.ts's DEFAULT_MAX_STALL_MS when absent. */
  watchStallMs?: number | undefined;
  /** The changes of every instance, for WatchUserChanges (started and stopped by the caller). */
  changes: UserChangeFeed;
  /** UserChat's rooms (started and stopped by the caller); local to this instance when not given. */
  chat?: ChatHub<ChatMessage> | undefined;
  /** log2 of scrypt's N for new password hashes. */
  hashCost: number;
  now: () => Date;
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /** The request rates, which each SyncUsers message takes from (grpc/stream-pace.ts); none when absent. */
  rates?: RequestRates | undefined;
  /** Who may sign up, how often, on which hashing lane (auth/signup-limits.ts); every account an admin's when absent. */
  signups?: SignUps | undefined;
}

/** Checks fields of a new user, naming every field that is wrong. */
function checkNewUser(request: CreateUserRequest): void {
  const problems = newUserProblems({ username: request.username, email: request.email, password: request.password, full_name: request.full_name });
  const fields = Object.keys(problems);
  if (fields.length > 0) throw new UserValidationError(fields.join(','), Object.values(problems).flat().join('; '));
}

export class UserServiceImpl {
  readonly #rooms: ChatHub<ChatMessage>;
  readonly #watches: StreamQuota;
  /** Streams that never end by themselves; ended by `endStreams` at shutdown. */
  readonly #open = new Set<{ emit(event: 'error', error: grpc.ServerErrorResponse): boolean }>();
  /**
   * A hash of a random password at this service's cost, checked in place of an unknown login's, so that a login
   * takes as long whether or not the account exists (a fixed hash at another cost would tell them apart by time).
   */
  #decoyHash: Promise<string> | undefined;

  constructor(private readonly options: UserServiceOptions) {
    this.#rooms = options.chat ?? new ChatHub<ChatMessage>();
    this.#watches = new StreamQuota('watch streams', options.watchLimits ?? DEFAULT_WATCH_LIMITS);
  }

  /** Where the watchers listen: each live watch stream is exactly one 'event' listener. */
  get events(): UserChangeFeed['events'] {
    return this.options.changes.events;
  }

  /** Live watch streams, for tests and metrics: each holds exactly one listener. */
  watcherCount(): number {
    return this.options.changes.watcherCount();
  }

  /** Watch streams open (live or still catching up), as the watch limits count them. */
  openWatches(): number {
    return this.#watches.size();
  }

  /** Ends the open watch and chat streams, so that a graceful shutdown can finish. */
  endStreams(): void {
    // UNAVAILABLE, not OK: the stream did not end by itself, and clients retry UNAVAILABLE (on another instance).
    for (const call of this.#open) endStream(call, SHUTTING_DOWN);
    this.#open.clear();
  }

  chatParticipantCount(): number {
    return this.#rooms.size();
  }

  handlers(): grpc.UntypedServiceImplementation {
    return {
      CreateUser: (call: grpc.ServerUnaryCall<CreateUserRequest, unknown>, callback: grpc.sendUnaryData<unknown>) =>
        this.#unary((request: CreateUserRequest) => this.#createUser(request, callerOf(call)), { public: true })(call, callback),
      GetUser: this.#unary((request: { user_id: string }, principal) =>
        this.options.users.get(userIdOf(request.user_id)).then((user) => {
          if (!user) throw new RpcError(Status.NOT_FOUND, `no user with id ${request.user_id}`);
          return userFor(principal, user);
        }),
      ),
      UpdateUser: this.#unary((request, principal) => this.#updateUser(request, principal)),
      DeleteUser: this.#unary(async (request: { user_id: string }, principal) => {
        await this.#deleteUser(userIdOf(request.user_id), principal);
        return {};
      }),
      ListUsers: (call: ListUsersCall) => this.#listUsers(call),
      WatchUserChanges: (call: WatchCall) =>
        watchUserChanges(call, {
          auth: this.options.auth,
          changes: this.options.changes,
          quota: this.#watches,
          open: this.#open,
          maxStallMs: this.options.watchStallMs,
        }),
      BulkCreateUsers: (call: grpc.ServerReadableStream<CreateUserRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => this.#bulkCreate(call, callback),
      ImportUsers: (call: grpc.ServerDuplexStream<CreateUserRequest, unknown>) => this.#importUsers(call),
      UserChat: (call: ChatCall) => userChat(call, { auth: this.options.auth, rooms: this.#rooms, open: this.#open, now: this.options.now }),
      SyncUsers: (call: grpc.ServerDuplexStream<SyncRequest, unknown>) => this.#sync(call),
    };
  }

  /** The user whose login (username or e-mail) and password match, if any, and active. */
  async checkCredentials(field: 'username' | 'email', login: string, password: string): Promise<UserRecord | undefined> {
    // Made at the first login of either kind, so that not even the first one tells them apart.
    this.#decoyHash ??= hashPassword(randomBytes(16).toString('base64'), this.options.hashCost);
    const user = await this.options.users.findByLogin(field, login);
    // Hash anyway when there is no such user, so the answer takes as long either way.
    const ok = await verifyPassword(password, user?.passwordHash ?? (await this.#decoyHash));
    if (!user || !ok || !user.isActive) return undefined;
    const { passwordHash: _hash, ...record } = user;
    return record;
  }

  /**
   * The key the login limits count a login under: the account's id when the login (username or e-mail) names one,
   * so that both routes share one count; else the login's own text, so that a lock tells nothing of existence.
   */
  async loginAccount(field: 'username' | 'email', login: string): Promise<string> {
    const user = await this.options.users.findByLogin(field, login);
    return user ? `user:${user.id}` : `${field}:${login.trim().toLowerCase()}`;
  }

  /** The principal behind the call's `authorization` metadata; rejects with UNAUTHENTICATED. */
  authenticate(metadata: grpc.Metadata): Promise<Principal> {
    return this.options.auth.authenticate(metadata);
  }

  /** Wraps a unary handler: authentication, one callback exactly once, statuses from errors. */
  #unary<Req, Res>(run: (request: Req, principal: Principal) => Res | Promise<Res>, options: { public?: boolean } = {}) {
    const answer = (callback: grpc.sendUnaryData<Res>) => ({
      ok: (response: Res) => callback(null, response),
      fail: (error: unknown) => {
        const status = toStatus(error);
        if (status.code === Status.INTERNAL) this.options.log?.('user service internal error', { error: String(error) });
        callback(status);
      },
    });
    // The hot path (token check, then the handler) is one promise chain with no extra turns.
    return (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
      const { ok, fail } = answer(callback);
      const principal = options.public ? Promise.resolve(ANONYMOUS) : this.authenticate(call.metadata);
      principal.then((who) => run(call.request, who)).then(ok, fail);
    };
  }

  /** A long call's principal, kept current (call-auth.ts), or undefined after ending the call with its status. */
  async #openStream(call: Parameters<CallAuth['open']>[0], options: Parameters<CallAuth['open']>[1] = {}): Promise<OpenStream | undefined> {
    try {
      return await this.options.auth.open(call, options);
    } catch (error) {
      failStream(call, error);
      return undefined;
    }
  }

  /** Deletes a user the principal may delete (the watchers hear of it through the change log). */
  async #deleteUser(id: number, principal: Principal): Promise<UserRecord> {
    this.#mayChange(principal, id, 'delete');
    const user = await this.options.users.delete(id);
    if (!user) throw new RpcError(Status.NOT_FOUND, `no user with id ${id}`);
    return user;
  }

  /** Changing or deleting another user, or anyone's roles or activity, needs the admin role. */
  #mayChange(principal: Principal, targetId: number, action: string, privileged = false): void {
    if (principal.isAdmin) return;
    if (principal.userId !== targetId) throw new RpcError(Status.PERMISSION_DENIED, `to ${action} another user you need the admin role`);
    if (privileged) throw new RpcError(Status.PERMISSION_DENIED, 'changing is_active or roles needs the admin role');
  }

  /** A rename to a reserved name is refused; an account that has one from before may keep it (the same spelling). */
  async #checkRename(id: number, username: string): Promise<void> {
    if (!isReservedUsername(username)) return;
    const current = await this.options.users.get(id);
    if (current?.username !== username) checkUnreservedUsername(username);
  }

  async #newUser(request: CreateUserRequest, options: { bulk?: boolean; signup?: boolean } = {}): Promise<NewUser> {
    checkNewUser(request);
    return {
      username: request.username,
      email: request.email,
      fullName: request.full_name ?? '',
      passwordHash: await hashPassword(request.password, this.options.hashCost, options),
    };
  }

  /**
   * Creates a user from any front door (gRPC CreateUser, the blog's POST
   * /users): validated, hashed, stored, and announced to watchers.
   */
  async registerUser(request: NewAccountRequest, options: { signup?: boolean } = {}): Promise<UserRecord> {
    return this.options.users.create({ ...(await this.#newUser(request, options)), bio: request.bio, avatarUrl: request.avatar_url });
  }

  /**
   * An account asked for from outside (CreateUser, the blog's POST /users): valid, then admitted as an admin's or
   * as a sign-up (counted per address and hashed on its own lane: auth/signup-limits.ts), then made.
   */
  async createAccount(request: NewAccountRequest, caller: AccountCaller): Promise<UserRecord> {
    checkNewUser(request);
    const signups = this.options.signups;
    return signups ? signups.admit(caller, (signup) => this.registerUser(request, { signup })) : this.registerUser(request);
  }

  async #createUser(request: CreateUserRequest, caller: AccountCaller) {
    const user = await this.createAccount(request, caller);
    return { user: userMessage(user), message: `user ${user.username} created with id ${user.id}` };
  }

  async #updateUser(request: { user_id: string; user: UserMessage | null; update_mask: { paths: string[] } | null }, principal: Principal) {
    const id = userIdOf(request.user_id);
    const given = request.user ?? ({} as Partial<UserMessage>);
    const paths = request.update_mask?.paths ?? [];
    checkMaxEntries('update_mask.paths', paths, REQUEST_LIMITS.updatePaths);
    let changes: UserChanges;
    if (paths.length === 0) {
      // No mask: the non-empty fields replace the stored ones, as the reference does.
      changes = {};
      if (given.username) changes.username = given.username;
      if (given.email) changes.email = given.email;
      if (given.full_name) changes.fullName = given.full_name;
    } else {
      const all = paths.includes('*');
      if (all && paths.length > 1) throw new RpcError(Status.INVALID_ARGUMENT, 'update_mask "*" must stand alone');
      const unknown = paths.filter((path) => path !== '*' && !(UPDATE_PATHS as readonly string[]).includes(path));
      if (unknown.length > 0) {
        throw new RpcError(
          Status.INVALID_ARGUMENT,
          `unknown update_mask path ${unknown.map((p) => `"${p}"`).join(', ')}; valid: ${UPDATE_PATHS.join(', ')}, *`,
        );
      }
      const wants = (path: (typeof UPDATE_PATHS)[number]) => all || paths.includes(path);
      changes = {};
      if (wants('username')) changes.username = given.username ?? '';
      if (wants('email')) changes.email = given.email ?? '';
      if (wants('full_name')) changes.fullName = given.full_name ?? '';
      if (wants('is_active')) changes.isActive = Boolean(given.is_active);
      if (wants('roles')) changes.roles = [...(given.roles ?? [])];
    }
    this.#mayChange(principal, id, 'change', changes.isActive !== undefined || changes.roles !== undefined);
    if (changes.username !== undefined) {
      checkUsername(changes.username);
      await this.#checkRename(id, changes.username);
    }
    if (changes.email !== undefined) checkEmail(changes.email);
    if (changes.fullName !== undefined) checkFullName(changes.fullName);
    if (changes.roles !== undefined) checkRoles(changes.roles);
    const user = await this.options.users.update(id, changes);
    if (!user) throw new RpcError(Status.NOT_FOUND, `no user with id ${request.user_id}`);
    return userMessage(user);
  }

  async #listUsers(call: ListUsersCall): Promise<void> {
    // Every user can take long to send: the list follows its token, as the other long streams do.
    const open = await this.#openStream(call);
    if (!open) return;
    try {
      await listUsers(call, this.options.users, () => open.principal);
    } catch (error) {
      failStream(call, error);
    }
  }

  /** Creates the rows of a stream (BulkCreateUsers, ImportUsers): each result, in order, once stored, each transaction as the token is then. */
  #createRows(
    call: RowStream,
    open: OpenStream,
    onResult: (result: { index: number; user: UserRecord } | { index: number; failure: BulkRowFailure }) => void,
    afterBatch?: () => Promise<void>,
  ): Promise<void> {
    return createFromStream(call, {
      prepare: (request) => this.#newUser(request, { bulk: true }),
      store: async (users) => {
        await open.recheck();
        return this.options.users.createMany(users);
      },
      onResult: (result) => {
        if ('user' in result) {
          onResult(result);
          return;
        }
        const status = toStatus(result.error);
        if (status.code === Status.INTERNAL) this.options.log?.('user service internal error', { error: String(result.error) });
        onResult({ index: result.index, failure: { status: statusName(status.code), message: status.details } });
      },
      ...(afterBatch ? { afterBatch } : {}),
    });
  }

  async #bulkCreate(call: grpc.ServerReadableStream<CreateUserRequest, unknown>, callback: grpc.sendUnaryData<unknown>): Promise<void> {
    // Rows that arrive while the token is checked wait in the stream: it flows once createFromStream reads it.
    let answered = false;
    const answer: grpc.sendUnaryData<unknown> = (error, value) => {
      if (answered) return;
      answered = true;
      callback(error, value);
    };
    let open: OpenStream;
    try {
      open = await this.options.auth.open(call, { require: requireAdmin('creating users in bulk'), end: (status) => answer(status) });
    } catch (error) {
      answer(toStatus(error));
      return;
    }
    const failures: BulkCreateFailure[] = [];
    let created = 0;
    this.#createRows(call, open, (result) => {
      if ('user' in result) created++;
      else failures.push({ index: result.index, ...result.failure });
    }).then(
      () => answer(null, { created_count: created, failures }),
      (error: unknown) => answer(toStatus(error)),
    );
  }

  async #importUsers(call: grpc.ServerDuplexStream<CreateUserRequest, unknown>): Promise<void> {
    let gone = false;
    const leave = () => {
      gone = true;
    };
    call.once('cancelled', leave);
    call.once('error', leave);
    const open = await this.#openStream(call, { require: requireAdmin('creating users in bulk') });
    if (!open) return;
    // A client that sends without reading its answers is held at the next transaction, not buffered for.
    const afterBatch = async () => {
      if (gone || !call.writableNeedDrain) return;
      const drained = new AbortController();
      await Promise.race([
        once(call, 'drain', { signal: drained.signal }).catch(() => undefined),
        once(call, 'cancelled', { signal: drained.signal }).catch(() => undefined),
      ]);
      drained.abort();
    };
    this.#createRows(
      call,
      open,
      (result) => {
        if (gone) return;
        call.write('user' in result ? { index: result.index, user: userMessage(result.user) } : { index: result.index, failure: result.failure });
      },
      afterBatch,
    ).then(
      () => {
        if (!gone) call.end();
      },
      (error: unknown) => {
        if (!gone) failStream(call, error);
      },
    );
  }

  async #sync(call: grpc.ServerDuplexStream<SyncRequest, unknown>): Promise<void> {
    let ended = false;
    const open = await this.#openStream(call, {
      end: (status) => {
        ended = true;
        endStream(call, status);
      },
    });
    if (!open) return;
    let queue = Promise.resolve();
    let pending = 0;
    call.on('data', (request: SyncRequest) => {
      // A client that sends without reading its answers is not read further until it does.
      if (++pending >= SYNC_READ_AHEAD) call.pause();
      // Answered strictly in order, whatever each one costs.
      queue = queue.then(async () => {
        if (ended) return;
        // Each message counts against the request rate; past it the message waits for the bucket, and the
        // messages behind it, read ahead up to SYNC_READ_AHEAD, wait with it.
        await pace(this.options.rates, call);
        if (ended) return;
        const given = request.client_ref ?? '';
        // A reference over its bound is not echoed back: the answer would carry what was refused.
        const ref = characters(given) <= REQUEST_LIMITS.clientRef ? given : '';
        try {
          checkMaxLength('client_ref', given, REQUEST_LIMITS.clientRef);
          // Each change is authorized as the token is now, not as it was when the stream opened.
          const principal = await open.recheck();
          const user = await this.#syncOne(request, principal);
          if (!ended) call.write({ client_ref: ref, user: userMessage(user) });
        } catch (error) {
          if (ended) return;
          const status = toStatus(error);
          call.write({ client_ref: ref, failure: { status: statusName(status.code), message: status.details } });
        } finally {
          if (--pending < SYNC_READ_AHEAD && call.isPaused() && !ended) {
            if (call.writableNeedDrain) await once(call, 'drain').catch(() => undefined);
            call.resume();
          }
        }
      });
    });
    call.on('end', () => void queue.then(() => !ended && call.end()));
    call.once('cancelled', () => {
      ended = true;
    });
  }

  async #syncOne(request: SyncRequest, principal: Principal): Promise<UserRecord> {
    if (request.operation === 'delete_user_id') {
      return this.#deleteUser(userIdOf(request.delete_user_id, 'delete_user_id'), principal);
    }
    if (request.operation !== 'upsert' || !request.upsert?.user) {
      throw new RpcError(Status.INVALID_ARGUMENT, 'each request needs an upsert (with a user) or a delete_user_id');
    }
    const given = request.upsert.user;
    const id = Number(given.id || 0);
    if (!id) {
      if (!principal.isAdmin) throw new RpcError(Status.PERMISSION_DENIED, 'creating users through sync needs the admin role');
      checkRoles(given.roles ?? []);
      return this.options.users.create({
        ...(await this.#newUser(
          { username: given.username, email: given.email, password: request.upsert.password, full_name: given.full_name },
          { bulk: true },
        )),
        // proto3 cannot tell an unset is_active from false: new users start active, as with CreateUser.
        isActive: true,
        roles: given.roles,
      });
    }
    const current = await this.options.users.get(userIdOf(id, 'user.id'));
    const privileged = current !== undefined && (current.isActive !== given.is_active || current.roles.join() !== (given.roles ?? []).join());
    this.#mayChange(principal, id, 'change', privileged);
    checkUsername(given.username);
    if (current?.username !== given.username) checkUnreservedUsername(given.username);
    checkEmail(given.email);
    checkFullName(given.full_name ?? '');
    checkRoles(given.roles ?? []);
    // Not used when replacing a user, but bounded like every field.
    checkMaxLength('password', request.upsert.password ?? '', USER_LIMITS.password.max);
    const user = await this.options.users.update(id, {
      username: given.username,
      email: given.email,
      fullName: given.full_name,
      isActive: given.is_active,
      roles: given.roles ?? [],
    });
    if (!user) throw new RpcError(Status.NOT_FOUND, `no user with id ${id}`);
    return user;
  }
}

/** Ends a streaming call with the error's status. */
function failStream(call: { emit(event: 'error', error: grpc.ServerErrorResponse): boolean }, error: unknown): void {
  endStream(call, toStatus(error));
}

type NewAccountRequest = CreateUserRequest & { bio?: string | null | undefined; avatar_url?: string | null | undefined };

/** The caller of a unary call, for the sign-up limit: its `authorization` metadata and address. */
function callerOf(call: grpc.ServerUnaryCall<unknown, unknown>): AccountCaller {
  const authorization = call.metadata.get('authorization')[0];
  return { authorization: typeof authorization === 'string' ? authorization : undefined, address: addressOf(call.getPeer()) };
}

const ANONYMOUS: Principal = { kind: 'user', userId: null, username: null, roles: [], isAdmin: false };

/** A stream's `require` for the admin role, for as long as it is open. */
function requireAdmin(action: string): (principal: Principal) => void {
  return (principal) => {
    if (!principal.isAdmin) throw new RpcError(Status.PERMISSION_DENIED, `${action} needs the admin role`);
  };
}
