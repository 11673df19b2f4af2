#!/usr/bin/env node
/**
 * `npm run package`: the package users install, as a tarball in the current
 * directory (or in the one given: `npm run package -- DIR`), built from dist/
 * (`npm run build` first).
 *
 * It is packed from a staging folder (a temporary one) that holds only what
 * ships: the launcher, the two CommonJS bundles (dist/quick/, dist/bundle/
 * with its vendored files), the protos and their descriptor set, web/, the
 * README and the licence; not the ESM tree of dist/ nor its source maps,
 * which the tests and benchmarks import. Its package.json is written here:
 * no scripts (nothing runs at install but the native driver's own build),
 * no devDependencies, and as dependencies only the packages the bundles
 * leave to `require` (RUNTIME_DEPENDENCIES, scripts/bundle-plugins.mjs), at the exact
 * version of the lock file, the one the tests ran against.
 *
 * `npm pack` run in the repository itself is refused (package.json's
 * `prepack`): it would ship the development manifest.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ROOT, RUNTIME_DEPENDENCIES } from './bundle-plugins.mjs';

/** What ships, from the repository: files and folders. */
const SHIPPED = ['bin/miniapp.cjs', 'dist/quick', 'dist/bundle', 'proto', 'web', 'README.md', 'LICENSE'];

const destination = resolve(process.argv[2] ?? process.cwd());
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));

for (const path of ['dist/quick/cli.cjs', 'dist/bundle/main.cjs', 'proto/descriptor-set.binpb', 'proto/loader.json']) {
  if (!existsSync(join(ROOT, path))) {
    console.error(`${path} is missing: run \`npm run build\` first`);
    process.exit(1);
  }
}

const dependencies = Object.fromEntries(
  RUNTIME_DEPENDENCIES.map((name) => {
    const version = lock.packages?.[`node_modules/${name}`]?.version;
    if (!version) throw new Error(`${name} is not in package-lock.json`);
    if (!manifest.dependencies?.[name]) throw new Error(`${name} is not a dependency in package.json`);
    return [name, version];
  }),
);

// A folder of its own for each run: a test's pack (test/install.test.ts) and a release on one checkout never meet.
const STAGE = mkdtempSync(join(tmpdir(), 'miniapp-package-'));
for (const path of SHIPPED) {
  // Not the build's own staging folder, nor a descriptor set's sources' config (buf.yaml is for `npm run build`).
  cpSync(join(ROOT, path), join(STAGE, path), { recursive: true, filter: (source) => !source.endsWith('buf.yaml') });
}
const shipped = {
  name: manifest.name,
  version: manifest.version,
  description: manifest.description,
  license: manifest.license,
  private: manifest.private,
  bin: manifest.bin,
  files: ['bin', 'dist', 'proto', 'web'],
  engines: manifest.engines,
  dependencies,
};
writeFileSync(join(STAGE, 'package.json'), `${JSON.stringify(shipped, null, 2)}\n`);

mkdirSync(destination, { recursive: true });
const pack = spawnSync('npm', ['pack', '--pack-destination', destination], { cwd: STAGE, stdio: 'inherit' });
rmSync(STAGE, { recursive: true, force: true });
process.exitCode = pack.status ?? 1;
