/**
 * A supported Node installs cleanly (issue 24, item 16): every package the
 * lock installs for users (the production tree) accepts the oldest Node of
 * package.json's `engines`, so `npm install` / `npm ci` warn of no
 * EBADENGINE there (cookie@2, through fastify's light-my-request, wanted
 * Node 22: an `overrides` entry keeps it at cookie@1, which has the same
 * stringifySetCookie). The README names the same oldest Node.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean; engines?: { node?: string } }> };

describe('engines', () => {
  const oldest = semver.minVersion(pkg.engines.node)!.version;

  it('every production package of the lock accepts the oldest supported Node', () => {
    const refusing = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== '' && !entry.dev && entry.engines?.node !== undefined && !semver.satisfies(oldest, entry.engines.node))
      .map(([path, entry]) => `${path} (${entry.engines!.node})`);
    expect(refusing, `these want a newer Node than ${oldest}`).toEqual([]);
    expect(lock.packages['node_modules/light-my-request/node_modules/cookie'] ?? lock.packages['node_modules/cookie']).toMatchObject({
      engines: { node: '>=18' },
    });
  });

  it('the README says the same oldest Node', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8')).toContain(`Requires Node.js ${oldest} or later.`);
  });
});
