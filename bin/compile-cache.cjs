'use strict';
/**
 * A code cache for this package's own bundles (dist/quick, dist/bundle): V8's
 * compiled code of each file is kept after a run and handed back to V8 on
 * the next, which then skips compiling what it already compiled: 5-7 % of a
 * short command's start on Node 20 (paired runs against the same launcher
 * without it; `serve`'s start, which runs far more than it compiles, moved
 * within its noise), where nothing else does it.
 *
 * - On Node 22.1 and later, Node's own module compile cache does this
 *   (module.enableCompileCache) and is used instead.
 * - The cache lives where Node 22 would put it: NODE_COMPILE_CACHE if set,
 *   else a directory of the user's own under the temporary directory
 *   (miniapp-compile-cache-UID, made 0700). A directory another user could
 *   write to is never used: compiled code is code. NODE_DISABLE_COMPILE_CACHE
 *   turns it off, as on Node 22.
 * - A file's entry is named by its name, size and modification time, so a
 *   rebuilt or upgraded bundle never meets the code of its predecessor (and
 *   V8 checks the source's length and its own flags again); older entries of
 *   the same file, and any entry written over a week before, are removed
 *   when a new one is written.
 * - Entries are written when the process exits, after the code ran (so the
 *   functions it called are compiled in), each to a temporary file renamed
 *   over the entry, so that concurrent runs never read half an entry.
 * - Any failure (a full disk, a read-only directory, a rejected entry) only
 *   means compiling as without a cache.
 */
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

const OWN = path.join(__dirname, '..', 'dist') + path.sep;
/** Entries (of other builds, other installs, runs that crashed while writing) written longer ago are removed. */
const STALE_MS = 7 * 24 * 3600_000;

/** The cache directory, made if missing; undefined when it is not this user's alone. */
function cacheDir() {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  const dir = process.env.NODE_COMPILE_CACHE || path.join(require('node:os').tmpdir(), `miniapp-compile-cache-${uid ?? 'user'}`);
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = fs.lstatSync(dir);
    if (!stat.isDirectory() || (stat.mode & 0o022) !== 0) return undefined;
    if (uid !== undefined && stat.uid !== uid) return undefined;
    return dir;
  } catch {
    return undefined;
  }
}

function enableCompileCache() {
  if (process.env.NODE_DISABLE_COMPILE_CACHE) return;
  if (typeof Module.enableCompileCache === 'function') {
    Module.enableCompileCache(process.env.NODE_COMPILE_CACHE || undefined);
    return;
  }
  const dir = cacheDir();
  if (!dir) return;
  const vm = require('node:vm');
  /** Scripts compiled without a usable entry: [entry path, script]. */
  const unsaved = [];
  const compile = Module.prototype._compile;
  Module.prototype._compile = function compileWithCache(content, filename) {
    if (!filename.startsWith(OWN)) return compile.call(this, content, filename);
    let script;
    let entry;
    try {
      const stat = fs.statSync(filename);
      entry = path.join(dir, `${path.basename(filename)}-${stat.size}-${Math.floor(stat.mtimeMs)}`);
      let cachedData;
      try {
        cachedData = fs.readFileSync(entry);
      } catch {}
      script = new vm.Script(Module.wrap(content), { filename, cachedData });
      if (cachedData === undefined || script.cachedDataRejected) unsaved.push([entry, script]);
    } catch {
      return compile.call(this, content, filename);
    }
    const wrapper = script.runInThisContext({ displayErrors: true });
    const requireHere = (id) => this.require(id);
    requireHere.resolve = (request, options) => Module._resolveFilename(request, this, false, options);
    requireHere.cache = Module._cache;
    requireHere.main = require.main;
    return wrapper.call(this.exports, this.exports, requireHere, this, filename, path.dirname(filename));
  };
  process.once('exit', () => {
    for (const [entry, script] of unsaved) {
      try {
        const name = path.basename(entry);
        const stem = name.slice(0, name.lastIndexOf('-', name.lastIndexOf('-') - 1) + 1);
        for (const old of fs.readdirSync(dir)) {
          if (old === name) continue;
          const oldPath = path.join(dir, old);
          const replaced = old.startsWith(stem) && /^\d+-\d+$/.test(old.slice(stem.length));
          if (replaced || fs.statSync(oldPath).mtimeMs < Date.now() - STALE_MS) fs.rmSync(oldPath, { force: true });
        }
        const temporary = `${entry}.${process.pid}.tmp`;
        fs.writeFileSync(temporary, script.createCachedData(), { mode: 0o600 });
        fs.renameSync(temporary, entry);
      } catch {}
    }
  });
}

module.exports = { enableCompileCache };
