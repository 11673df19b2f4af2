#!/usr/bin/env node
// Launcher: loads the compiled CLI and sets the exit code; nothing else.
import { processContext } from '../dist/cli/context.js';
import { runCli } from '../dist/cli/main.js';

process.exitCode = await runCli(process.argv.slice(2), processContext());
