/**
 * Text from elsewhere (a callback's referrer, a chat message, a log field)
 * made safe to print on a terminal: control characters, which could move
 * the cursor, clear the screen, retitle the window or hide what follows,
 * are shown as `\xHH` instead of being obeyed. Tab and newline stay (the
 * callers that need one line fold them first); carriage return, escape,
 * DEL and the C1 controls (8-bit CSI among them) do not.
 */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
