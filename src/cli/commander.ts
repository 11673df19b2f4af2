/**
 * commander, loaded with require: its ESM entry makes Node's ESM loader
 * resolve the package's exports and translate the CommonJS module, which
 * costs `miniapp --help` a measurable share of its start-up on top of
 * loading the same code through require. Same classes, same instances.
 */
import { createRequire } from 'node:module';
import type * as CommanderModule from 'commander';

const commander = createRequire(import.meta.url)('commander') as typeof CommanderModule;

export const { Command, CommanderError, Option } = commander;
export type Command = CommanderModule.Command;
export type CommanderError = CommanderModule.CommanderError;
export type Option = CommanderModule.Option;
