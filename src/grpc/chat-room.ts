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
 * Why the room keeps the backlog rather than grpc-js: grpc-js takes every
 * write, and a status written after 1000 queued messages is sent only once
 * the peer has read them all, so a peer that never reads would keep all of
 * them for as long as its connection lives. Messages in the backlog are
 * shared by every member they wait for; only references are per member.
 */
import * as grpc from '@grpc/grpc-js';
import { failStream } from './status.js';

export const DEFAULT_MAX_UNREAD = 1000;

/** The part of a server stream a room needs. */
export interface Member<T> {
  write(message: T): boolean;
  readonly writableLength: number;
  emit(event: 'error', error: grpc.ServerErrorResponse): boolean;
  on(event: 'drain', listener: () => void): unknown;
  off(event: 'drain', listener: () => void): unknown;
}

/** A member's place: what waits for it, and whether its stream takes more now. */
interface Seat<T> {
  backlog: T[];
  full: boolean;
  onDrain: () => void;
}

export class ChatRooms<T> {
  readonly #rooms = new Map<string, Set<Member<T>>>();
  readonly #seats = new Map<Member<T>, Seat<T>>();
  readonly #maxUnread: number;
  readonly #onDropped: ((room: string) => void) | undefined;

  constructor(options: { maxUnread?: number; onDropped?: (room: string) => void } = {}) {
    this.#maxUnread = options.maxUnread ?? DEFAULT_MAX_UNREAD;
    this.#onDropped = options.onDropped;
  }

  join(room: string, member: Member<T>): void {
    let members = this.#rooms.get(room);
    if (!members) this.#rooms.set(room, (members = new Set()));
    members.add(member);
    if (!this.#seats.has(member)) {
      const seat: Seat<T> = { backlog: [], full: false, onDrain: () => this.#drain(member, seat) };
      member.on('drain', seat.onDrain);
      this.#seats.set(member, seat);
    }
  }

  /** Takes the member out of every room it is in, and lets go of what waited for it. */
  leave(member: Member<T>): void {
    for (const [room, members] of this.#rooms) {
      members.delete(member);
      if (members.size === 0) this.#rooms.delete(room);
    }
    const seat = this.#seats.get(member);
    if (seat) {
      member.off('drain', seat.onDrain);
      seat.backlog.length = 0;
      this.#seats.delete(member);
    }
  }

  /** Sends `message` to every member of `room` but `from`, dropping members that stopped reading. */
  broadcast(room: string, from: Member<T> | undefined, message: T): void {
    for (const member of [...(this.#rooms.get(room) ?? [])]) {
      if (member === from) continue;
      const seat = this.#seats.get(member);
      if (!seat) continue;
      if (!seat.full) {
        seat.full = !member.write(message);
        continue;
      }
      if (seat.backlog.length + member.writableLength >= this.#maxUnread) {
        this.#drop(member, room);
        continue;
      }
      seat.backlog.push(message);
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

  #drain(member: Member<T>, seat: Seat<T>): void {
    seat.full = false;
    let next = 0;
    while (next < seat.backlog.length && !seat.full) seat.full = !member.write(seat.backlog[next++]!);
    seat.backlog.splice(0, next);
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
