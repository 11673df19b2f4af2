#!/usr/bin/env node
/**
 * Builds the whole CLI (src/cli/main.ts: the compiled dist/cli/main.js and
 * everything it imports, packages included) into CommonJS chunks in
 * dist/bundle/, the program the launcher runs for every command the quick
 * path does not serve (`npm run build` runs this after tsc). The package
 * ships this bundle and not the ESM tree of dist/, which the tests and the
 * benchmarks import.
 *
 * - CommonJS, as the quick path (scripts/bundle-quick.mjs): no ESM loader.
 * - Every package is bundled but the native driver, better-sqlite3 (its
 *   compiled binary is found next to its own files), and the optional
 *   drivers that are not installed (pg-native). A package that reads its
 *   own files at run time (`__dirname`) is bundled too, with the files it
 *   reads copied into dist/bundle/vendor/ (VENDORED below); any other use of
 *   `__dirname` or `import.meta` in a package fails the build, so a new one
 *   cannot slip through.
 * - Code reached through a dynamic `import()` (each command group, each
 *   command's action, serve, tracing, the packages loaded on first use)
 *   goes into chunks of its own, loaded when reached, and every other module
 *   into a chunk shared by exactly the ones that need it (rolldown's own
 *   split, no manual groups): serve loads no tracing SDK while traces are
 *   off, `users list` no HTTP server. Manual groups by package family were
 *   tried and dropped: with their dependencies they pulled the SDK into serve
 *   (debug and semver, shared with swagger), without them they made chunks
 *   that require each other in a cycle, one reading an export of the other
 *   before it was set (serve failed to start).
 * - Every chunk sits in dist/bundle/, two levels below the package root.
 *   A path the compiled modules take relative to `import.meta.url`
 *   (`new URL('../../proto', import.meta.url)`, the host page's web/host/,
 *   package.json) is rewritten relative to that folder, so it names the
 *   same file wherever the module lands.
 * - Minified with names kept, as the quick path is; no source maps (the
 *   package ships no sources to map to).
 */
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';
import { rolldown } from 'rolldown';
import { BUILTINS, commanderAsImport, DYNAMIC_IMPORT_AS_REQUIRE, EXTERNAL, lazyChildProcess, noImportLeft, ROOT } from './bundle-plugins.mjs';

const DIST = join(ROOT, 'dist');
const OUT = join(DIST, 'bundle');

/**
 * Packages that read their own files, by path under node_modules, and the
 * files (or folders) of the package they read. Their `__dirname` is pointed
 * at the copy in dist/bundle/vendor/<package>/, where the same relative
 * paths find the same files.
 */
const VENDORED = {
  // Reads its own package.json once, for defaults of the document's info (miniapp gives its own).
  '@fastify/swagger': ['package.json'],
  // Swagger UI's page: its static assets, served by @fastify/static from the package's static/.
  '@fastify/swagger-ui': ['static'],
  // Loads health.proto from its package when it is first imported.
  'grpc-health-check': ['proto'],
  // channelz.proto and the xDS load-report protos (ORCA), loaded when those features are first used.
  '@grpc/grpc-js': ['proto'],
  // Loads reflection.proto (v1 and v1alpha) from its package.
  '@grpc/reflection': ['build/proto/grpc/reflection'],
  // The HTML report inlines uPlot's script and styles (src/cli/charts/html-report.ts).
  uplot: ['dist/uPlot.iife.min.js', 'dist/uPlot.min.css'],
};

/**
 * Packages whose `__dirname` names files miniapp never has them read, bundled as they are: pino's transports
 * start a worker from pino's lib/worker.js through thread-stream's, and miniapp gives its loggers a stream,
 * never a transport.
 */
const UNREAD = new Set(['pino', 'thread-stream']);

const posixPath = (path) => path.split(sep).join('/');
/** The package a file of node_modules belongs to (`@scope/name` or `name`), and its root. */
function packageOf(id) {
  const path = posixPath(id);
  const match = /^(.*\/node_modules\/)((?:@[^/]+\/)?[^/]+)\//.exec(path);
  return match ? { name: match[2], root: match[1] + match[2] } : undefined;
}
/** dist/bundle/vendor/<package>/<the module's folder in it>, relative to the bundle's folder (where every chunk is). */
const vendoredDir = (pkg, id) => posix.join('vendor', pkg.name, posix.relative(pkg.root, posix.dirname(posixPath(id))));

/**
 * The compiled modules that take a path relative to their own URL: made
 * relative to dist/bundle/. A `createRequire(import.meta.url)` that loads a
 * package becomes a plain `require` the bundler follows (commander,
 * csv-stringify, asciichart), one that resolves a file of a vendored package
 * a path into its copy, one that resolves the native driver stays as it is
 * (the chunk's own URL finds it as the module's did).
 */
const compiledPaths = {
  name: 'compiled-paths',
  transform(code, id) {
    if (!posixPath(id).startsWith(`${posixPath(DIST)}/`) || !code.includes('import.meta')) return null;
    let out = code.replace(/new URL\('([^']+)', import\.meta\.url\)/g, (_, path) => {
      const target = resolve(dirname(id), path);
      // The package ships the bundles, not the compiled tree: a file of dist/ read at run time would be missing.
      if (posixPath(target).startsWith(`${posixPath(DIST)}/`))
        throw new Error(`${id}: new URL('${path}', import.meta.url) names a file of dist/, which the package does not ship`);
      const fromBundle = posixPath(relative(OUT, target)) + (path.endsWith('/') ? '/' : '');
      return `new URL(${JSON.stringify(fromBundle)}, import.meta.url)`;
    });
    // A name bound to createRequire(import.meta.url), or the call itself, that loads a package.
    const requirers = [...out.matchAll(/const (\w+) = createRequire\(import\.meta\.url\);/g)].map((match) => match[1]);
    for (const name of requirers) {
      out = out.replace(new RegExp(`\\b${name}\\.resolve\\('([^']+)'\\)`, 'g'), (_, request) => {
        const pkg = Object.keys(VENDORED).find((name) => request.startsWith(`${name}/`));
        if (!pkg) throw new Error(`${id}: resolves ${request}, which is not a vendored file (see VENDORED)`);
        return `require('node:path').join(__dirname, ${JSON.stringify(posix.join('vendor', request))})`;
      });
      out = out.replace(new RegExp(`\\b${name}\\('([^']+)'\\)`, 'g'), "require('$1')");
      out = out.replace(new RegExp(`const ${name} = createRequire\\(import\\.meta\\.url\\);`), '');
    }
    out = out.replace(/createRequire\(import\.meta\.url\)\('([^']+)'\)/g, "require('$1')");
    const placed = out.replace(/new URL\("[^"]*", import\.meta\.url\)/g, '').replace(/createRequire\(import\.meta\.url\)\.resolve\('better-sqlite3'\)/g, '');
    if (placed.includes('import.meta')) throw new Error(`${id}: a use of import.meta the bundle does not know how to place`);
    return out;
  },
};

/**
 * A module that a compiled module imports both statically and with `import()`
 * (serve's command: drain.js for its constants, then for drainAndClose at the
 * first signal) is loaded already: the `import()` becomes its namespace, where
 * rolldown would make a facade chunk that the signal then has to read from
 * disk (gone, if the package was replaced under a running serve).
 */
const loadedImports = {
  name: 'loaded-imports',
  transform(code, id) {
    if (!posixPath(id).startsWith(`${posixPath(DIST)}/`)) return null;
    const statics = new Set([...code.matchAll(/^import [^;]*? from '(\.[^']+)';$/gm)].map((match) => match[1]));
    const loaded = [];
    const out = code.replace(/\bimport\('(\.[^']+)'\)/g, (call, path) => {
      if (!statics.has(path)) return call;
      loaded.push(path);
      return `Promise.resolve(__loaded${loaded.length})`;
    });
    if (loaded.length === 0) return null;
    return `${loaded.map((path, index) => `import * as __loaded${index + 1} from '${path}';`).join('\n')}\n${out}`;
  },
};

/** `__dirname` in a package's module: the vendored copy of its folder; in a package not listed, an error. */
const vendoredFiles = {
  name: 'vendored-files',
  transform(code, id) {
    const pkg = packageOf(id);
    if (!pkg) return null;
    // Comments aside (commander's and import-in-the-middle's name them in examples).
    const source = code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
    if (!/\b__dirname\b|\bimport\.meta\b/.test(source) || UNREAD.has(pkg.name)) return null;
    if (!(pkg.name in VENDORED)) throw new Error(`${id} reads files relative to itself: vendor what it reads (see VENDORED) or keep it external`);
    // The vendored files are copied from the top-level copy of the package: a nested one of another version would read them.
    if (pkg.root !== posixPath(join(ROOT, 'node_modules', pkg.name)))
      throw new Error(`${id}: a nested copy of ${pkg.name}, whose files are not the vendored ones`);
    if (/\bimport\.meta\b/.test(code)) throw new Error(`${id}: import.meta in a vendored package is not handled`);
    return code.replace(/\b__dirname\b/g, `require('node:path').join(__dirname, ${JSON.stringify(vendoredDir(pkg, id))})`);
  },
};

rmSync(OUT, { recursive: true, force: true });
const bundle = await rolldown({
  input: { main: join(DIST, 'cli', 'main.js') },
  platform: 'node',
  external: (id) => BUILTINS.has(id) || EXTERNAL.has(id) || [...EXTERNAL].some((name) => id.startsWith(`${name}/`)),
  plugins: [commanderAsImport, lazyChildProcess, compiledPaths, loadedImports, vendoredFiles, noImportLeft],
  preserveEntrySignatures: 'allow-extension',
  logLevel: 'warn',
  onLog(level, log, report) {
    if (log.code !== 'INEFFECTIVE_DYNAMIC_IMPORT') report(level, log);
  },
});
const { output } = await bundle.write({
  dir: OUT,
  format: 'cjs',
  ...DYNAMIC_IMPORT_AS_REQUIRE,
  entryFileNames: '[name].cjs',
  chunkFileNames: '[name]-[hash].cjs',
  comments: false,
  minify: { compress: true, mangle: { keepNames: true } },
});
await bundle.close();

/**
 * Which modules each chunk holds, for the start-up tests: they trace the
 * files a command loads, and read a chunk of the bundle as every module in
 * it (test/helpers/launcher.ts). Beside the bundle, not in it: it does not ship.
 */
const modules = Object.fromEntries(output.filter((item) => item.type === 'chunk').map((chunk) => [chunk.fileName, chunk.moduleIds.map(posixPath)]));
writeFileSync(join(DIST, 'bundle-modules.json'), `${JSON.stringify(modules, null, 1)}\n`);

for (const [name, paths] of Object.entries(VENDORED)) {
  for (const path of paths) {
    mkdirSync(dirname(join(OUT, 'vendor', name, path)), { recursive: true });
    cpSync(join(ROOT, 'node_modules', name, path), join(OUT, 'vendor', name, path), { recursive: true });
  }
}
