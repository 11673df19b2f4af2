/**
 * Rooms of a bidirectional chat stream (user.v1 UserChat, monitoring.v1
 * Chat): each message goes to every other member of its room.
 *
 * A member that does not read cannot make the server buffer without limit:
 * a write that finds more than `maxUnread` messages still queued for that
 * member ends its call with RESOURCE_EXHAUSTED and takes it out of every
 * room; the others go on. (grpc-js queues what the peer's flow-control
 * window does not take, so the queue length is what a slow reader costs.)
 */
import * as grpc from '@grpc/grpc-js';
import { failStream } from './status.js';

export const DEFAULT_MAX_UNREAD = 1000;

/** The part of a server stream a room needs. */
export interface Member<T> {
  write(message: T): boolean;
  readonly writableLength: number;
  emit(event: 'error', error: grpc.ServerErrorResponse): boolean;
}

export class ChatRooms<T> {
  readonly #rooms = new Map<string, Set<Member<T>>>();
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
  }

  /** Takes the member out of every room it is in. */
  leave(member: Member<T>): void {
    for (const [room, members] of this.#rooms) {
      members.delete(member);
      if (members.size === 0) this.#rooms.delete(room);
    }
  }

  /** Sends `message` to every member of `room` but `from`, dropping members that stopped reading. */
  broadcast(room: string, from: Member<T> | undefined, message: T): void {
    for (const member of [...(this.#rooms.get(room) ?? [])]) {
      if (member === from) continue;
      if (member.writableLength >= this.#maxUnread) {
        this.leave(member);
        failStream(member, {
          code: grpc.status.RESOURCE_EXHAUSTED,
          details: `more than ${this.#maxUnread} messages waited to be read: a participant that does not read is disconnected`,
        });
        this.#onDropped?.(room);
        continue;
      }
      member.write(message);
    }
  }

  /** How many members all rooms have together. */
  size(): number {
    let count = 0;
    for (const members of this.#rooms.values()) count += members.size;
    return count;
  }
}
