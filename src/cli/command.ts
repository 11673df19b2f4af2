/**
 * The contract between the program (program.ts) and a command group's file
 * (commands/*.ts): a group registers its commands on the program, and
 * wraps each action with `bind`, which hands it the command context.
 */
import type { Command } from './commander.js';
import type { CommandContext } from './context.js';

/** A command's action: the command context and the commander command it ran as. */
export type Handler = (cc: CommandContext, command: Command) => Promise<void>;
/** Wraps a handler into a commander action that receives the command context. */
export type Bind = (handler: Handler) => (...args: unknown[]) => Promise<void>;
export type Register = (program: Command, bind: Bind) => void;
