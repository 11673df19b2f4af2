/**
 * Certificates and keys arrive as a file path or as PEM text (serverless
 * hosts keep them in environment variables). One reader for both.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';

export function readPem(value: string, what: string): string {
  const trimmed = value.trim();
  if (trimmed.startsWith('-----BEGIN')) return `${trimmed.replace(/\\n/g, '\n')}\n`;
  try {
    return readFileSync(trimmed, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read ${what} from ${trimmed}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, {
      hint: `give ${what} as a readable PEM file path or as the PEM text itself`,
    });
  }
}
