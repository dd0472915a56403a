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
 * Keeps a tile store's reads and writes inside its root after symlinks: each folder is resolved once (and
 * remembered while it exists), each tile file is opened without following a symlink. The root itself is
 * confined by whoever names it (`confinePath`); anyone who can write inside it could still link a subfolder
 * or a tile elsewhere.
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
      if (code !== 'ENOENT') throw new StoreEscapeError(`tile store: ${this.relative(dir)} cannot be resolved (${code ?? 'error'})`);
      exists = false;
      real = await realPathOf(dir).catch((e: NodeJS.ErrnoException) => {
        throw new StoreEscapeError(`tile store: ${this.relative(dir)} cannot be resolved (${e.code ?? 'error'})`);
      });
    }
    const root = await this.resolvedRoot();
    if (!within(real, root)) throw new StoreEscapeError(`tile store: ${this.relative(dir)} leads outside the store through a symlink; not used`);
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

  /** The file's bytes, opened without following a symlink (one swapped in after lstat is refused too). */
  async readFile(file: string): Promise<Buffer> {
    let fh;
    try {
      fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new StoreEscapeError(`tile store: ${this.relative(file)} is a symlink; not read`);
      throw err;
    }
    try {
      return await fh.readFile();
    } finally {
      await fh.close();
    }
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
