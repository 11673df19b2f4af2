/**
 * Chat rooms that span every instance sharing a store (user.v1 UserChat,
 * monitoring.v1 Chat). Each instance keeps its own members in ChatRooms
 * (with its rule for members that stop reading); what crosses instances is
 * the message itself.
 *
 * On a shared store (PostgreSQL) a message is written to `chat_messages`
 * and a signal carries its id and room (a signal's payload is capped near
 * 8000 bytes, a message may be 4096 characters of any script); each
 * instance with members in that room reads it and hands it to them, its
 * sender's own instance skipping the sender. Every instance thus sees the
 * messages of a room in the same order, the order of the signals. Messages
 * are not kept: they are trimmed after a few minutes, and a member that was
 * not there does not get them later.
 *
 * On SQLite or in memory there is one instance: a message goes straight to
 * the other members, as it always did, and nothing is written.
 */
import { randomBytes } from 'node:crypto';
import type { Signals } from '../store/signals.js';
import type { Sql } from '../store/sql.js';
import { ChatRooms, type Member } from './chat-room.js';

/** How long a message stays in `chat_messages`: far longer than any instance takes to read it. */
const RETENTION_MS = 5 * 60 * 1000;
const TRIM_EVERY_MS = 60 * 1000;

export interface SharedChat {
  sql: Sql;
  signals: Signals;
  /** The signal channel, and the `channel` column of its messages: one per chat service. */
  channel: string;
  now?: () => Date;
  /** A message that could not be read (its room's members here miss it). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
}

interface Envelope<T> {
  room: string;
  /** The instance the message was sent on, and its sender's number there. */
  origin: string;
  from: number | null;
  message: T;
}

export class ChatHub<T> {
  readonly #rooms: ChatRooms<T>;
  readonly #shared: SharedChat | undefined;
  /** Tells this instance's messages from the others' when they come back. */
  readonly #instance = randomBytes(8).toString('hex');
  readonly #numbers = new Map<Member<T>, number>();
  readonly #members = new Map<number, Member<T>>();
  #next = 0;
  /** Messages are read one after the other, in the order of their signals. */
  #reading: Promise<void> = Promise.resolve();
  #unsubscribe: (() => Promise<void>) | undefined;
  #trim: NodeJS.Timeout | undefined;

  constructor(options: { shared?: SharedChat | undefined; maxUnread?: number } = {}) {
    this.#rooms = new ChatRooms<T>(options.maxUnread === undefined ? {} : { maxUnread: options.maxUnread });
    this.#shared = options.shared;
  }

  async start(): Promise<void> {
    const shared = this.#shared;
    if (!shared) return;
    this.#unsubscribe = await shared.signals.subscribe(shared.channel, (payload) => this.#heard(payload));
    this.#trim = setInterval(() => {
      const before = new Date((shared.now?.() ?? new Date()).getTime() - RETENTION_MS).toISOString();
      void shared.sql.run('DELETE FROM chat_messages WHERE channel = $1 AND at < $2', [shared.channel, before]).catch(() => undefined);
    }, TRIM_EVERY_MS);
    this.#trim.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#trim);
    await this.#unsubscribe?.();
    await this.#reading;
  }

  join(room: string, member: Member<T>): void {
    this.#rooms.join(room, member);
    if (this.#shared && !this.#numbers.has(member)) {
      const number = ++this.#next;
      this.#numbers.set(member, number);
      this.#members.set(number, member);
    }
  }

  /** Takes the member out of every room it is in. */
  leave(member: Member<T>): void {
    this.#rooms.leave(member);
    const number = this.#numbers.get(member);
    if (number !== undefined) {
      this.#numbers.delete(member);
      this.#members.delete(number);
    }
  }

  /** How many members all rooms of this instance have together. */
  size(): number {
    return this.#rooms.size();
  }

  /**
   * Sends `message` to every member of `room` but `from`, on every
   * instance. Local: done on return. Shared: resolves once the message is
   * stored and signalled; the sender should send its next one after that,
   * so that its messages keep their order.
   */
  send(room: string, from: Member<T> | undefined, message: T): Promise<void> | undefined {
    const shared = this.#shared;
    if (!shared) {
      this.#rooms.broadcast(room, from, message);
      return undefined;
    }
    const envelope: Envelope<T> = { room, origin: this.#instance, from: (from && this.#numbers.get(from)) ?? null, message };
    const at = (shared.now?.() ?? new Date()).toISOString();
    return shared.sql
      .one<{ id: number }>('INSERT INTO chat_messages (channel, payload, at) VALUES ($1, $2, $3) RETURNING id', [shared.channel, JSON.stringify(envelope), at])
      .then((row) => shared.signals.publish(shared.channel, `${row!.id} ${room}`));
  }

  #heard(payload: string): void {
    const space = payload.indexOf(' ');
    const id = Number(payload.slice(0, space));
    const room = payload.slice(space + 1);
    // Rooms nobody here is in cost nothing.
    if (space < 0 || !Number.isSafeInteger(id) || !this.#rooms.has(room)) return;
    this.#reading = this.#reading.then(() => this.#deliver(id));
  }

  async #deliver(id: number): Promise<void> {
    const shared = this.#shared!;
    try {
      const row = await shared.sql.one<{ payload: string }>('SELECT payload FROM chat_messages WHERE id = $1', [id]);
      if (!row) return;
      const envelope = JSON.parse(row.payload) as Envelope<T>;
      // The sender never gets its own message back (a sender that has left is in no room any more).
      const from = envelope.origin === this.#instance && envelope.from !== null ? this.#members.get(envelope.from) : undefined;
      this.#rooms.broadcast(envelope.room, from, envelope.message);
    } catch (error) {
      shared.warn?.('cannot read a chat message; members of its room here miss it', { id, error: String(error) });
    }
  }
}
