/**
 * The gRPC client of user.v1.UserService, on the channel, credentials,
 * metadata and deadlines every client of serve shares
 * (grpc/client/channel.ts).
 *
 * Every failure leaves here as a typed error whose `code` is the gRPC
 * status name: UNAUTHENTICATED an AuthError (exit 4), UNAVAILABLE and
 * DEADLINE_EXCEEDED an UpstreamError (exit 5), anything else a
 * MiniappError (exit 1) reading `NOT_FOUND: no user with id 9`.
 *
 * Nothing here prints or reads the environment: streams report through
 * callbacks, and the command decides how to show them.
 */
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { UpstreamError } from '../errors.js';
import { formatDuration } from '../duration.js';
import { answersInPlainText, isServiceError, notTlsError, NOT_REACHED_HINT, unreachableHint, type ErrorContext } from '../grpc/client/errors.js';
import { channelReady, ServiceConnection, type ConnectOptions } from '../grpc/client/channel.js';
import { withReconnects } from '../grpc/client/reconnect.js';
import {
  LIST_NEXT_PAGE_TOKEN_HEADER,
  LIST_PAGE_SIZE_HEADER,
  LIST_TOTAL_HEADER,
  WATCH_POSITION_HEADER,
  type BulkCreateFailure,
  type ChatMessage,
  type CreateUserRequest,
  type EventTypeName,
  type ImportUsersResponse,
  type Timestamp,
  type UpdatePath,
  type UserMessage,
} from './proto.js';

export type { ChatMessage, CreateUserRequest, UpdatePath } from './proto.js';

export type { ErrorContext } from '../grpc/client/errors.js';

export { DEFAULT_DEADLINE_MS, type ConnectOptions } from '../grpc/client/channel.js';

export interface CreateUserResponse {
  user: UserMessage | null;
  message: string;
}

export interface ListUsersRequest {
  page?: number;
  page_size?: number;
  filter?: string;
  /** The previous page's nextPageToken; empty or absent for the first page. */
  page_token?: string;
}

export interface WatchUserRequest {
  user_id?: string;
  types?: EventTypeName[];
  /** Resume after the change with this sequence (int64 as a string); unset: from now on. */
  resume_after?: string;
}

export interface UserEvent {
  type: EventTypeName;
  user: UserMessage | null;
  timestamp: Timestamp | null;
  /** The change's number in the server's log ("0" from a server that does not number changes). */
  sequence: string;
}

export interface BulkCreateResponse {
  created_count: number;
  failures: BulkCreateFailure[];
}

/** One page of ListUsers, with what the server said about all pages. */
export interface UserPage {
  users: UserMessage[];
  /** Users matching the filter on all pages; undefined from a server that does not say. */
  total: number | undefined;
  /** The page size the server applied (0 = all); undefined from a server that does not say. */
  pageSize: number | undefined;
  /** The page_token of the next page; empty on the last page, and from a server without page tokens. */
  nextPageToken: string;
}

/** The result of one row of a bulk create. `user` is null when the server answered with a count only (BulkCreateUsers). */
export type RowResult = { index: number; user: UserMessage | null } | { index: number; failure: { status: string; message: string } };

/** A user as sync sends it: the User message without the server-set created_at. */
export type SyncUser = Omit<UserMessage, 'created_at'>;

export type UserSyncRequest = { client_ref: string; upsert: { user: SyncUser; password: string } } | { client_ref: string; delete_user_id: string };

export interface UserSyncResponse {
  client_ref: string;
  result?: 'user' | 'failure';
  user?: UserMessage | null;
  failure?: { status: string; message: string } | null;
}

type Callback<Res> = (error: grpc.ServiceError | null, response?: Res) => void;
type Unary<Req, Res> = (request: Req, metadata: grpc.Metadata, options: grpc.CallOptions, callback: Callback<Res>) => grpc.ClientUnaryCall;

/** The methods the loaded service constructor adds, with the message shapes of proto.ts's loader options. */
interface RawUserClient extends grpc.Client {
  CreateUser: Unary<CreateUserRequest, CreateUserResponse>;
  GetUser: Unary<{ user_id: string }, UserMessage>;
  UpdateUser: Unary<{ user_id: string; user: Partial<UserMessage>; update_mask: { paths: string[] } }, UserMessage>;
  DeleteUser: Unary<{ user_id: string }, Record<string, never>>;
  ListUsers(request: ListUsersRequest, metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientReadableStream<UserMessage>;
  WatchUserChanges(request: WatchUserRequest, metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientReadableStream<UserEvent>;
  BulkCreateUsers(metadata: grpc.Metadata, options: grpc.CallOptions, callback: Callback<BulkCreateResponse>): grpc.ClientWritableStream<CreateUserRequest>;
  ImportUsers(metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientDuplexStream<CreateUserRequest, ImportUsersResponse>;
  UserChat(metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientDuplexStream<Partial<ChatMessage>, ChatMessage>;
  SyncUsers(metadata: grpc.Metadata, options: grpc.CallOptions): grpc.ClientDuplexStream<UserSyncRequest, UserSyncResponse>;
}

// ------------------------------------------------------------------ client

/** A count the server sent as metadata, if it sent one. */
function countOf(metadata: grpc.Metadata, key: string): number | undefined {
  const text = String(metadata.get(key)[0] ?? '');
  return /^\d+$/.test(text) ? Number(text) : undefined;
}

export function connectUserService(options: ConnectOptions): UserServiceClient {
  return new UserServiceClient(new ServiceConnection(options));
}

/** Writes every item of `source` with back-pressure, until the source ends or `stopped()` says the call is over. */
async function writeAll<T>(
  call: grpc.ClientWritableStream<T> | grpc.ClientDuplexStream<T, unknown>,
  source: AsyncIterable<T>,
  stopped: () => boolean,
  ended: Promise<unknown>,
  onSent?: (count: number) => void,
): Promise<void> {
  let sent = 0;
  for await (const item of source) {
    if (stopped()) return;
    if (!call.write(item)) {
      const drained = new AbortController();
      await Promise.race([once(call, 'drain', { signal: drained.signal }).catch(() => undefined), ended.catch(() => undefined)]);
      drained.abort();
    }
    onSent?.(++sent);
  }
}

/** Rows ImportUsers sends ahead of their answers: enough to keep serve's hashing busy, few enough to wait for. */
const IMPORT_WINDOW = 64;

/** How an import is stopped from outside. */
export interface ImportControl {
  /** Nothing more is read or sent; the rows sent are still answered, and the import then ends as usual. */
  stop?: AbortSignal;
  /** The call is cancelled at once: rows sent but not answered may or may not be stored. */
  cancel?: AbortSignal;
  /** Rows sent ahead of their answers (default IMPORT_WINDOW). */
  window?: number;
}

export class UserServiceClient {
  readonly address: string;
  readonly deadlineMs: number;
  readonly #connection: ServiceConnection;
  readonly #raw: RawUserClient;
  readonly #context: ErrorContext;

  constructor(connection: ServiceConnection) {
    this.#connection = connection;
    this.#raw = connection.client<RawUserClient>('user.v1.UserService');
    this.address = connection.address;
    this.deadlineMs = connection.deadlineMs;
    this.#context = connection.context;
  }

  #metadata(): grpc.Metadata {
    return this.#connection.metadata();
  }

  #deadline(): grpc.CallOptions {
    return { deadline: this.#connection.deadline() };
  }

  #error(error: unknown): unknown {
    return this.#connection.error(error);
  }

  #unary<Req, Res>(method: Unary<Req, Res>, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.#raw, request, this.#metadata(), this.#deadline(), (error, response) => {
        if (error) reject(this.#error(error));
        else resolve(response as Res);
      });
    });
  }

  /**
   * Resolves once the channel is connected; UNAVAILABLE as soon as the
   * first attempt fails, DEADLINE_EXCEEDED after `timeoutMs` without an answer.
   */
  async ready(timeoutMs = this.deadlineMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const outcome = await channelReady(this.#raw.getChannel(), deadline);
    if (outcome === 'ready') return;
    if (outcome === 'timeout') {
      throw new UpstreamError(`DEADLINE_EXCEEDED: could not connect to the user service at ${this.address} within ${formatDuration(timeoutMs)}`, {
        code: 'DEADLINE_EXCEEDED',
        hint: `${NOT_REACHED_HINT}; or raise --deadline`,
      });
    }
    // Over TLS, a server that answers in plain text is told apart from one that is not there.
    if (this.#context.tls && (await answersInPlainText(this.address, Math.max(deadline - Date.now(), 1)))) throw notTlsError(this.#context);
    throw new UpstreamError(`UNAVAILABLE: cannot connect to the user service at ${this.address}`, {
      code: 'UNAVAILABLE',
      hint: unreachableHint(this.#context.tls),
    });
  }

  async createUser(request: CreateUserRequest): Promise<CreateUserResponse> {
    return this.#unary(this.#raw.CreateUser, request);
  }

  getUser(id: string): Promise<UserMessage> {
    return this.#unary(this.#raw.GetUser, { user_id: id });
  }

  /** Changes exactly the fields named in `paths` (AIP-134 update_mask). */
  updateUser(id: string, user: Partial<UserMessage>, paths: readonly UpdatePath[]): Promise<UserMessage> {
    return this.#unary(this.#raw.UpdateUser, { user_id: id, user, update_mask: { paths: [...paths] } });
  }

  async deleteUser(id: string): Promise<void> {
    await this.#unary(this.#raw.DeleteUser, { user_id: id });
  }

  async listUsers(request: ListUsersRequest): Promise<UserPage> {
    const call = this.#raw.ListUsers(request, this.#metadata(), this.#deadline());
    const page: UserPage = { users: [], total: undefined, pageSize: undefined, nextPageToken: '' };
    call.once('metadata', (metadata: grpc.Metadata) => {
      page.total = countOf(metadata, LIST_TOTAL_HEADER);
      page.pageSize = countOf(metadata, LIST_PAGE_SIZE_HEADER);
      page.nextPageToken = String(metadata.get(LIST_NEXT_PAGE_TOKEN_HEADER)[0] ?? '');
    });
    try {
      for await (const user of call) page.users.push(user as UserMessage);
    } catch (error) {
      throw this.#error(error);
    }
    return page;
  }

  /**
   * One watch call: `onEvent` for each change until the server ends the
   * stream (resolves) or fails it (rejects), or `signal` aborts (resolves,
   * the call cancelled).
   */
  async watch(
    request: WatchUserRequest,
    handlers: { onEvent: (event: UserEvent) => void; signal?: AbortSignal | undefined; onPosition?: ((after: number) => void) | undefined },
  ): Promise<void> {
    const { signal } = handlers;
    if (signal?.aborted) return;
    const call = this.#raw.WatchUserChanges(request, this.#metadata(), {});
    // The server says where the watch starts (see WATCH_POSITION_HEADER); an older server says nothing.
    call.once('metadata', (headers: grpc.Metadata) => {
      const value = Number(headers.get(WATCH_POSITION_HEADER)[0]);
      if (Number.isSafeInteger(value) && value >= 0) handlers.onPosition?.(value);
    });
    const cancel = () => call.cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    try {
      for await (const event of call) {
        if (signal?.aborted) break;
        handlers.onEvent(event as UserEvent);
      }
    } catch (error) {
      if (!signal?.aborted) throw this.#error(error);
    } finally {
      signal?.removeEventListener('abort', cancel);
      if (signal?.aborted) call.cancel();
    }
  }

  /**
   * Streams `rows` (with back-pressure: the server reads in batches) and
   * closes; the server's count and failures, whose `index` is the 0-based
   * position in the stream.
   */
  async bulkCreate(rows: AsyncIterable<CreateUserRequest>, onSent?: (count: number) => void): Promise<BulkCreateResponse> {
    let finished = false;
    let call!: grpc.ClientWritableStream<CreateUserRequest>;
    const result = new Promise<BulkCreateResponse>((resolve, reject) => {
      call = this.#raw.BulkCreateUsers(this.#metadata(), {}, (error, response) => {
        finished = true;
        if (error) reject(this.#error(error));
        else resolve(response as BulkCreateResponse);
      });
    });
    result.catch(() => {});
    try {
      await writeAll(call, rows, () => finished, result, onSent);
    } catch (error) {
      // The input failed (a read error): nothing half-done should count as a bulk create.
      call.cancel();
      throw error;
    }
    call.end();
    return result;
  }

  /**
   * Creates `rows` with ImportUsers: hands over each row's result (in the
   * order of the rows) as the server stores it. A server without
   * ImportUsers (UNIMPLEMENTED, before any answer) gets the same rows
   * through BulkCreateUsers, after `onFallback`; its results then all come
   * at the end, created rows without their user.
   */
  async importUsers(
    rows: AsyncIterable<CreateUserRequest>,
    handlers: { onResult: (result: RowResult) => void; onFallback?: () => void; onSent?: (count: number) => void },
    control: ImportControl = {},
  ): Promise<'ImportUsers' | 'BulkCreateUsers'> {
    const source = rows[Symbol.asyncIterator]();
    const window = control.window ?? IMPORT_WINDOW;
    // Rows sent before the first answer, to send again should the server not know ImportUsers.
    let replay: CreateUserRequest[] | undefined = [];
    const call = this.#raw.ImportUsers(this.#metadata(), {});
    let finished = false;
    let pulled = 0;
    let answered = 0;
    let wake: (() => void) | undefined;
    const poke = () => {
      const waiting = wake;
      wake = undefined;
      waiting?.();
    };
    const reading = (async () => {
      try {
        for await (const answer of call) {
          replay = undefined;
          answered++;
          poke();
          const { index, user, failure } = answer as ImportUsersResponse;
          handlers.onResult(failure ? { index, failure: { status: failure.status, message: failure.message } } : { index, user: user ?? null });
        }
      } finally {
        finished = true;
        poke();
      }
    })();
    reading.catch(() => {});
    const stopping = control.stop ? once(control.stop, 'abort').then(() => ({ done: true as const, value: undefined })) : undefined;
    stopping?.catch(() => undefined);
    control.stop?.addEventListener('abort', poke, { once: true });
    const cancel = () => call.cancel();
    control.cancel?.addEventListener('abort', cancel, { once: true });
    // No `return`: leaving the loop early must not end `rows`, which a fallback goes on reading.
    const remembered: AsyncIterable<CreateUserRequest> = {
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<CreateUserRequest>> => {
          // At most `window` rows ahead of their answers: what was sent is what serve will soon have answered.
          while (!finished && !control.stop?.aborted && pulled - answered >= window) await new Promise<void>((resolve) => (wake = resolve));
          if (control.stop?.aborted) return { done: true, value: undefined };
          // A stop ends the wait for the next row too (stdin that stays open).
          const next = await (stopping ? Promise.race([source.next(), stopping]) : source.next());
          if (control.stop?.aborted) return { done: true, value: undefined };
          if (!next.done) {
            pulled++;
            replay?.push(next.value);
          }
          return next;
        },
      }),
    };
    try {
      try {
        await writeAll(call, remembered, () => finished, reading, handlers.onSent);
      } catch (error) {
        call.cancel();
        throw error;
      }
      call.end();
      try {
        await reading;
        return 'ImportUsers';
      } catch (error) {
        if (!replay || !isServiceError(error) || error.code !== grpc.status.UNIMPLEMENTED) throw this.#error(error);
      }
    } finally {
      control.cancel?.removeEventListener('abort', cancel);
      control.stop?.removeEventListener('abort', poke);
    }
    handlers.onFallback?.();
    const again = replay;
    const stop = control.stop;
    const rest = (async function* () {
      yield* again;
      while (!stop?.aborted) {
        const next = await (stopping ? Promise.race([source.next(), stopping]) : source.next());
        if (next.done || stop?.aborted) return;
        yield next.value;
      }
    })();
    let sent = 0;
    const response = await this.bulkCreate(rest, (count) => {
      sent = count;
      handlers.onSent?.(count);
    });
    const failed = new Map(response.failures.map((failure) => [failure.index, failure] as const));
    for (let index = 0; index < sent; index++) {
      const failure = failed.get(index);
      handlers.onResult(failure ? { index, failure: { status: failure.status, message: failure.message } } : { index, user: null });
    }
    return 'BulkCreateUsers';
  }

  /** Sends each request and hands over each answer, in order, until both sides are done. */
  async sync(requests: AsyncIterable<UserSyncRequest>, onResponse: (response: UserSyncResponse) => void): Promise<void> {
    const call = this.#raw.SyncUsers(this.#metadata(), {});
    let finished = false;
    const reading = (async () => {
      try {
        for await (const response of call) onResponse(response as UserSyncResponse);
      } catch (error) {
        throw this.#error(error);
      } finally {
        finished = true;
      }
    })();
    reading.catch(() => {});
    try {
      await writeAll(call, requests, () => finished, reading);
    } catch (error) {
      call.cancel();
      throw error;
    }
    call.end();
    await reading;
  }

  /**
   * Joins `room` at once (a message with empty text is a join), sends each
   * of `lines`, hands over what the others say; half-closes when `lines`
   * ends and resolves when the server ends the call, or at once on abort.
   * `lines` may still be pending when this returns (an open terminal):
   * the caller owns it.
   */
  async chat(options: {
    room: string;
    lines: AsyncIterable<string>;
    onMessage: (message: ChatMessage) => void;
    signal?: AbortSignal | undefined;
  }): Promise<void> {
    const { signal } = options;
    if (signal?.aborted) return;
    const call = this.#raw.UserChat(this.#metadata(), {});
    const cancel = () => call.cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    let finished = false;
    const reading = (async () => {
      try {
        for await (const message of call) options.onMessage(message as ChatMessage);
      } finally {
        finished = true;
      }
    })();
    reading.catch(() => {});
    call.write({ room: options.room, text: '' });
    const messages = (async function* () {
      for await (const text of options.lines) yield { room: options.room, text };
    })();
    const writing = writeAll(call, messages, () => finished || Boolean(signal?.aborted), reading).then(
      () => {
        if (!finished && !signal?.aborted) call.end();
      },
      (error: unknown) => {
        if (!finished && !signal?.aborted) call.cancel();
        throw error;
      },
    );
    writing.catch(() => {});
    try {
      // Whichever ends the chat first: the server's end (or failure), or the input failing.
      await Promise.race([reading, writing.then(() => reading)]);
    } catch (error) {
      if (signal?.aborted) return;
      throw this.#error(error);
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  close(): void {
    this.#connection.close();
  }
}

// ------------------------------------------------------------------ watch with reconnects

export interface WatchLoopOptions {
  /** A fresh client per attempt, so that only this loop's back-off applies (not the channel's own). */
  connect: () => UserServiceClient;
  request: WatchUserRequest;
  signal: AbortSignal;
  onEvent: (event: UserEvent) => void;
  /**
   * After each successful connection; `reconnected` is false the first
   * time; `resumedAfter`, the sequence the watch resumed after (none when
   * the server does not number its changes: then the changes made while
   * disconnected are not replayed).
   */
  onConnected?: (info: { reconnected: boolean; resumedAfter: number | undefined }) => void;
  /** Before each wait to reconnect. */
  onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
  /** First wait before reconnecting (default 250 ms), doubled per failed attempt up to `maxDelayMs` (10 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Time limit to connect, per attempt. */
  connectTimeoutMs: number;
}

/**
 * Watches until `signal` aborts. The first connection must succeed (a
 * wrong address fails at once, exit 5); after that, a stream the server
 * ends (a restart ends watches gracefully) or an UNAVAILABLE connection is
 * retried with exponential back-off, reset after each successful
 * connection. Each reconnection resumes after the last change seen (or,
 * before any, where the server said the watch started), so no change is
 * missed or seen twice, whichever instance of a shared database answers.
 */
export async function watchUserChanges(options: WatchLoopOptions): Promise<void> {
  // The last change seen (from the request's resume_after, then each event's sequence): each reconnection resumes after it.
  let last = options.request.resume_after === undefined ? undefined : Number(options.request.resume_after);
  const onEvent = (event: UserEvent) => {
    const sequence = Number(event.sequence);
    if (sequence > 0) last = sequence;
    options.onEvent(event);
  };
  await withReconnects({
    signal: options.signal,
    connect: () => {
      const client = options.connect();
      return { client, ready: () => client.ready(options.connectTimeoutMs), close: () => client.close() };
    },
    run: async ({ client }, signal) => {
      const request = last === undefined ? options.request : { ...options.request, resume_after: String(last) };
      // A watch that has seen no change yet resumes where the server says it started: nothing made meanwhile is lost.
      await client.watch(request, { onEvent, signal, onPosition: (after) => (last ??= after) });
      return 'again';
    },
    onConnected: ({ reconnected }) => options.onConnected?.({ reconnected, resumedAfter: last }),
    onRetry: options.onRetry,
    baseDelayMs: options.baseDelayMs,
    maxDelayMs: options.maxDelayMs,
  });
}
