#!/usr/bin/env node
// Launcher: loads the compiled CLI and sets the exit code; nothing else.
import { processContext } from '../dist/cli/context.js';
import { runCli } from '../dist/cli/main.js';

// A closed pipe (`miniapp config list | head -1`) is the reader's choice, not an error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await runCli(process.argv.slice(2), processContext());
