import { constants, type Stats } from 'node:fs';
import { lstat, open, realpath } from 'node:fs/promises';
import path from 'node:path';
import { realPathOf, within } from '../confine/confine';

/**
 * A tile store path that leads out of the store through a symlink, or a tile file that is a symlink: never
 * read or written. Its message names the path relative to the store, never what lies outside or in the file.
 */
export class StoreEscapeError extends Error {
  override readonly name = 'StoreEscapeError';
}

/**
 * Keeps a tile store's reads and writes inside its root after symlinks, at the moment each happens: a write
 * goes through a folder opened and checked for it (`openDir`), a read through a descriptor checked after it
 * was opened (`readConfinedFile`). `checkDir` answers early (a refusal before any request), and remembers a
 * folder found inside, but only as a hint: anyone who can write inside the root can swap a folder or a tile
 * for a symlink at any time. The root itself is confined by whoever names it (`confinePath`).
 */
export class StoreBounds {
  private realRoot: string | null = null;
  private readonly inside = new Set<string>();

  constructor(readonly root: string) {}

  /** `p` as the store names it in errors. */
  relative(p: string): string {
    return path.relative(this.root, p) || '.';
  }

  /** Throws unless `dir` (existing or not yet made) resolves inside the root; `fresh` skips the cache. */
  async checkDir(dir: string, fresh = false): Promise<void> {
    if (!fresh && this.inside.has(dir)) return;
    let real: string;
    let exists = true;
    try {
      real = await realpath(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT')
        throw new StoreEscapeError(`tile store: ${this.relative(dir)} cannot be resolved (${code ?? 'error'})`);
      exists = false;
      real = await realPathOf(dir).catch((e: NodeJS.ErrnoException) => {
        throw new StoreEscapeError(`tile store: ${this.relative(dir)} cannot be resolved (${e.code ?? 'error'})`);
      });
    }
    const root = await this.resolvedRoot();
    if (!within(real, root))
      throw new StoreEscapeError(
        `tile store: ${this.relative(dir)} leads outside the store through a symlink; not used`,
      );
    if (exists) this.inside.add(dir);
  }

  /** Throws when `file` is a symlink; its lstat otherwise (null when absent). */
  async lstatFile(file: string): Promise<Stats | null> {
    try {
      const st = await lstat(file);
      if (st.isSymbolicLink()) throw new StoreEscapeError(`tile store: ${this.relative(file)} is a symlink; not read`);
      return st;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return null;
      throw err;
    }
  }

  /**
   * `dir` opened and checked for one use (a tile's writes and removals), refused when it leads outside the
   * root. On Linux every name in it is then reached through the opened descriptor (`/proc/self/fd/<n>/<name>`),
   * so a folder swapped for a symlink after the check is never followed; elsewhere the folder is resolved
   * again just before the use. `close()` when done.
   */
  async openDir(dir: string): Promise<OpenedDir> {
    const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      if (!(await hasProcFd())) {
        await this.checkDir(dir, true);
        return { at: (name) => path.join(dir, name), close: () => fh.close() };
      }
      const byFd = path.join(PROC_FD, String(fh.fd));
      // The folder actually opened, wherever the path led: one deleted meanwhile no longer resolves.
      const real = await realpath(byFd).catch((e: NodeJS.ErrnoException) => {
        throw new StoreEscapeError(`tile store: ${this.relative(dir)} cannot be resolved (${e.code ?? 'error'})`);
      });
      if (!within(real, await this.resolvedRoot()))
        throw new StoreEscapeError(
          `tile store: ${this.relative(dir)} leads outside the store through a symlink; not used`,
        );
      return { at: (name) => path.join(byFd, name), close: () => fh.close() };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /** The file's bytes, confined at the moment of reading (`readConfinedFile`). */
  readFile(file: string): Promise<Buffer> {
    return readConfinedFile(file, this.root);
  }

  private async resolvedRoot(): Promise<string> {
    if (this.realRoot !== null) return this.realRoot;
    try {
      this.realRoot = await realpath(this.root);
      return this.realRoot;
    } catch {
      // Not made yet: where it will be (not remembered, it may be made differently).
      return realPathOf(this.root).catch(() => path.resolve(this.root));
    }
  }
}

/** A store folder opened for one use: `at(name)` is the path to use for a file in it. */
export interface OpenedDir {
  at(name: string): string;
  close(): Promise<void>;
}

const PROC_FD = '/proc/self/fd';
let procFd: Promise<boolean> | undefined;
/** Whether names can be reached through a descriptor (Linux's /proc); asked once per process. */
function hasProcFd(): Promise<boolean> {
  procFd ??= lstat(PROC_FD).then(
    (st) => st.isDirectory(),
    () => false,
  );
  return procFd;
}

/**
 * The bytes of `file`, read only if, at the moment of reading, it is a regular file (not a symlink, FIFO or
 * device) whose folder resolves inside `root`. A check made earlier (an lstat, a realpath) says nothing of a
 * file or folder swapped for a symlink since: this one holds for the descriptor actually read. A refusal is a
 * StoreEscapeError naming the path relative to `root`, never what lies outside or in the file; a missing
 * file is Node's ENOENT.
 */
export async function readConfinedFile(file: string, root: string): Promise<Buffer> {
  const abs = path.resolve(file);
  const rel = (p: string) => path.relative(path.resolve(root), p) || '.';
  let fh;
  try {
    // O_NONBLOCK: a FIFO planted at the name would otherwise hold the open until someone writes to it.
    fh = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP')
      throw new StoreEscapeError(`tile store: ${rel(abs)} is a symlink; not read`);
    throw err;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new StoreEscapeError(`tile store: ${rel(abs)} is not a regular file; not read`);
    // Where the folder leads now, and the file found there by that real path must be the one opened: a folder
    // linked out when it was opened and linked back since is caught too.
    const resolve = (p: string) =>
      realpath(p).catch((e: NodeJS.ErrnoException) => {
        throw new StoreEscapeError(`tile store: ${rel(p)} cannot be resolved (${e.code ?? 'error'})`);
      });
    const [realRoot, realDir] = await Promise.all([resolve(root), resolve(path.dirname(abs))]);
    if (!within(realDir, realRoot))
      throw new StoreEscapeError(
        `tile store: ${rel(path.dirname(abs))} leads outside the store through a symlink; not used`,
      );
    const there = await lstat(path.join(realDir, path.basename(abs))).catch(() => null);
    if (!there || there.dev !== st.dev || there.ino !== st.ino)
      throw new StoreEscapeError(`tile store: ${rel(abs)} was replaced while it was read; not read`);
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}
