/**
 * Rooms of a bidirectional chat stream (user.v1 UserChat, monitoring.v1
 * Chat): each message goes to every other member of its room.
 *
 * A member that does not read cannot make the server buffer without limit.
 * Each member's stream is written only while it accepts more (`write`
 * returns true, that is grpc-js holds fewer than its high-water mark of 16
 * messages); after that, messages wait in the member's backlog here until
 * 'drain'. A member with `maxUnread` messages waiting (backlog and stream
 * together) is dropped: its backlog is freed, it leaves every room, and its
 * call ends with RESOURCE_EXHAUSTED once it has read the few messages
 * grpc-js already held. The others, sender included, go on.
 *
 * The backlog is a StreamOutbox's (stream-outbox.ts), which says why it is
 * kept here rather than by grpc-js. Messages in the backlogs are shared by
 * every member they wait for; only references are per member.
 */
import * as grpc from '@grpc/grpc-js';
import { failStream } from './status.js';
import { DEFAULT_MAX_UNREAD, StreamOutbox, type OutboxStream } from './stream-outbox.js';

/** The part of a server stream a room needs. */
export type Member<T> = OutboxStream<T>;

export class ChatRooms<T> {
  readonly #rooms = new Map<string, Set<Member<T>>>();
  readonly #seats = new Map<Member<T>, StreamOutbox<T>>();
  readonly #maxUnread: number;
  readonly #onDropped: ((room: string) => void) | undefined;

  constructor(options: { maxUnread?: number; onDropped?: (room: string) => void } = {}) {
    this.#maxUnread = options.maxUnread ?? DEFAULT_MAX_UNREAD;
    this.#onDropped = options.onDropped;
  }

  join(room: string, member: Member<T>): void {
    let members = this.#rooms.get(room);
    if (!members) {
      members = new Set();
      this.#rooms.set(room, members);
    }
    members.add(member);
    if (!this.#seats.has(member)) {
      this.#seats.set(member, new StreamOutbox(member, { maxUnread: this.#maxUnread, onOverflow: () => this.#drop(member, room) }));
    }
  }

  /** Takes the member out of every room it is in, and lets go of what waited for it. */
  leave(member: Member<T>): void {
    for (const [room, members] of this.#rooms) {
      members.delete(member);
      if (members.size === 0) this.#rooms.delete(room);
    }
    this.#seats.get(member)?.close();
    this.#seats.delete(member);
  }

  /** Sends `message` to every member of `room` but `from`, dropping members that stopped reading. */
  broadcast(room: string, from: Member<T> | undefined, message: T): void {
    for (const member of [...(this.#rooms.get(room) ?? [])]) {
      if (member === from) continue;
      this.#seats.get(member)?.write(message);
    }
  }

  /** Whether `room` has members. */
  has(room: string): boolean {
    return this.#rooms.has(room);
  }

  /** How many members all rooms have together. */
  size(): number {
    let count = 0;
    for (const members of this.#rooms.values()) count += members.size;
    return count;
  }

  #drop(member: Member<T>, room: string): void {
    this.leave(member);
    failStream(member, {
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: `${this.#maxUnread} messages waited to be read: a participant that does not read is disconnected`,
    });
    this.#onDropped?.(room);
  }
}
