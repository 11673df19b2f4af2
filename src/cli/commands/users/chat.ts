/** `miniapp users chat`: stdin lines out, the room's messages in. */
import { printable } from '../../render/printable.js';
import type { Command } from 'commander';
import type { CommandContext } from '../../context.js';
import type { ConnectionFlags } from '../../connect/grpc-connection.js';
import { UsageError } from '../../../errors.js';
import { destroyInput, linesOf } from '../../terminal/input.js';
import { isoOf } from '../../views/grpc-user-view.js';
import type { ChatMessage } from '../../../users/client.js';
import { connect } from './shared.js';

export async function runChat(cc: CommandContext, command: Command): Promise<void> {
  const flags = command.opts<ConnectionFlags & { room: string }>();
  const room = flags.room.trim();
  if (!room) throw new UsageError('--room must not be empty');
  const client = await connect(cc, flags);
  const controller = new AbortController();
  let stoppedBy: string | undefined;
  void cc.waitForShutdown().then((signal) => {
    stoppedBy = signal;
    controller.abort();
  });
  const lines = (async function* () {
    for await (const { text } of linesOf(cc.io.stdin)) {
      if (text.trim()) yield text;
    }
  })();
  try {
    await client.ready();
    if (cc.io.stdin.isTTY && !cc.out.json)
      cc.out.info(cc.out.errColor.dim(`joined [${room}] on ${client.address}; type a line to send it, Ctrl-D or Ctrl-C to leave`));
    await client.chat({
      room,
      lines,
      signal: controller.signal,
      onMessage: (message: ChatMessage) => {
        if (cc.out.json) {
          cc.out.line(JSON.stringify({ room: message.room, sender: message.sender, text: message.text, sent_at: isoOf(message.sent_at) }));
        } else {
          const c = cc.out.color;
          // Another user's words: shown, never obeyed by the terminal.
          cc.out.line(`${c.dim(`[${printable(message.room)}]`)} ${c.bold(printable(message.sender))}: ${printable(message.text)}`);
        }
      },
    });
  } finally {
    client.close();
    // A chat that ends before its input (the server left, Ctrl-C) must not wait on the terminal.
    destroyInput(cc.io.stdin);
    controller.abort();
  }
  if (stoppedBy) cc.out.info(`${stoppedBy}: left [${room}]`);
}
