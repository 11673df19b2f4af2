/**
 * UserChat (user.v1): a client joins a room by sending to it (an empty text
 * joins without saying anything), and hears what the others in its rooms
 * say, on this instance and, through the chat hub, on the others. The
 * sender is who the token is now: a renamed user speaks under the new name.
 * The stream ends at shutdown (the service's open streams) or when its
 * token's grant ends (grpc/call-auth.ts).
 */
import type * as grpc from '@grpc/grpc-js';
import type { CallAuth } from '../grpc/call-auth.js';
import type { ChatHub } from '../grpc/chat-hub.js';
import { failStream as endStream } from '../grpc/status.js';
import { toTimestamp, type ChatMessage } from './proto.js';
import { REQUEST_LIMITS, toStatus } from './rpc-common.js';
import { checkMaxLength } from './user-store.js';

export type ChatCall = grpc.ServerDuplexStream<ChatMessage, ChatMessage>;

export interface ChatDeps {
  auth: CallAuth;
  rooms: ChatHub<ChatMessage>;
  /** The service's streams that end only at shutdown: the chat is in it while it lives. */
  open: Set<{ emit(event: 'error', error: grpc.ServerErrorResponse): boolean }>;
  now: () => Date;
}

export async function userChat(call: ChatCall, deps: ChatDeps): Promise<void> {
  const joined = new Set<string>();
  const leave = () => {
    deps.open.delete(call);
    deps.rooms.leave(call);
    joined.clear();
  };
  let open;
  try {
    open = await deps.auth.open(call, {
      end: (status) => {
        leave();
        endStream(call, status);
      },
    });
  } catch (error) {
    failStream(call, error);
    return;
  }
  if (call.cancelled) return;
  deps.open.add(call);
  call.on('data', (message: ChatMessage) => {
    try {
      checkChatMessage(message);
    } catch (error) {
      leave();
      failStream(call, error);
      return;
    }
    const room = message.room?.trim() || 'general';
    if (!joined.has(room)) {
      joined.add(room);
      deps.rooms.join(room, call);
    }
    // An empty text joins the room without saying anything.
    if (!message.text) return;
    const sent = deps.rooms.send(room, call, {
      room,
      // Who the sender is now: a renamed user speaks under the new name.
      sender: open.principal.username ?? (message.sender || 'admin'),
      text: message.text,
      sent_at: message.sent_at ?? toTimestamp(deps.now()),
    });
    if (!sent) return;
    // Through the database to the other instances: the next message is read once this one is on its way, so they keep their order.
    call.pause();
    sent.then(
      () => call.resume(),
      (error: unknown) => {
        leave();
        failStream(call, error);
      },
    );
  });
  call.on('end', () => {
    leave();
    call.end();
  });
  call.once('cancelled', leave);
  call.once('close', leave);
  call.once('error', leave);
}

/** A chat line within its bounds, naming the field that is not. */
function checkChatMessage(message: ChatMessage): void {
  checkMaxLength('room', message.room ?? '', REQUEST_LIMITS.chatRoom);
  checkMaxLength('sender', message.sender ?? '', REQUEST_LIMITS.chatSender);
  checkMaxLength('text', message.text ?? '', REQUEST_LIMITS.chatText);
}

/** Ends a streaming call with the error's status. */
function failStream(call: { emit(event: 'error', error: grpc.ServerErrorResponse): boolean }, error: unknown): void {
  endStream(call, toStatus(error));
}
