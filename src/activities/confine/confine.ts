import { mkdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../breaker/config-error';
import { OUTPUT_DIR_ENV, SOURCES_DIR_ENV } from './roots';

/**
 * Kernel pseudo-filesystems: never read or written on a requester's behalf, whatever the roots say (a
 * recursive mkdir under /proc never ends, and a read of /dev/zero never ends either).
 */
const FORBIDDEN = ['/proc', '/sys', '/dev'];
const MAX_PATH_CHARS = 4_096;
const MAX_DEPTH = 64;

/** `p` is `dir` or lies under it, as written (no file system call). */
export const within = (p: string, dir: string) =>
  p === dir || p.startsWith(dir.endsWith(path.sep) ? dir : dir + path.sep);
const forbidden = (p: string) => FORBIDDEN.some((f) => within(p, f));

/** Why `p` cannot be used at all, before any file system call; null when it may be resolved. */
function shapeRefusal(p: string): string | null {
  if (p.includes('\0')) return 'contains a NUL character';
  if (p.length > MAX_PATH_CHARS) return `is longer than ${MAX_PATH_CHARS} characters`;
  const abs = path.resolve(p);
  if (abs.split(path.sep).length > MAX_DEPTH) return `is more than ${MAX_DEPTH} folders deep`;
  if (forbidden(abs)) return `lies under ${FORBIDDEN.join(', ')}, which a worker never touches`;
  return null;
}

/**
 * `p` with every symlink resolved, whether or not it exists yet: the real path of its deepest existing
 * ancestor, followed by the components still to be made. The walk up is bounded by the path's depth.
 */
export async function realPathOf(p: string): Promise<string> {
  let existing = path.resolve(p);
  const rest: string[] = [];
  for (let i = 0; i <= MAX_DEPTH; i++) {
    try {
      return path.join(await realpath(existing), ...rest);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' || existing === path.dirname(existing)) throw err;
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
  throw new Error(`${p}: more than ${MAX_DEPTH} folders deep`);
}

/**
 * Resolves `p` (relative paths from the first root) and checks that it lies, after symlinks, under one of
 * `roots`. Throws a ConfigError naming the field, the path and the roots; returns the real path. A path that
 * is outside the roots as written is refused before any file system call, and one that leads outside through
 * a symlink is refused without saying where: neither may tell a requester what exists outside the roots.
 */
export async function confinePath(
  p: string,
  roots: readonly string[],
  field: string,
  subject: string,
): Promise<string> {
  const env = field.startsWith('sources') ? SOURCES_DIR_ENV : OUTPUT_DIR_ENV;
  const refuse = (why: string): never => {
    throw new ConfigError(subject, [`${field}: ${JSON.stringify(p)} ${why}`]);
  };
  const outside = () =>
    refuse(`is outside this worker's roots (${roots.join(', ')}); set ${env} on the worker to allow it`);
  if (roots.length === 0) refuse('cannot be used: this worker has no roots configured for it');
  const abs = path.resolve(roots[0]!, p);
  const shape = shapeRefusal(abs);
  if (shape) refuse(shape);
  const realRoots = await Promise.all(roots.map((r) => realPathOf(path.resolve(r)).catch(() => path.resolve(r))));
  const lexicalRoots = roots.map((r) => path.resolve(r));
  if (![...lexicalRoots, ...realRoots].some((r) => within(abs, r))) outside();
  let real: string;
  try {
    real = await realPathOf(abs);
  } catch (err) {
    // The code only (ENOTDIR, EACCES, ELOOP): a message could carry more than the requester should learn.
    return refuse(`cannot be resolved (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (forbidden(real)) refuse(`leads through a symlink under ${FORBIDDEN.join(', ')}, which a worker never touches`);
  if (!realRoots.some((r) => within(real, r)))
    refuse(`leads outside this worker's roots (${roots.join(', ')}) through a symlink`);
  return real;
}

/**
 * mkdir -p with a bound: at most `maxNew` folders made, each with its own mkdir, so no path can keep it
 * looping (Node's recursive mkdir spins forever on some pseudo-filesystems). True when it made `dir`.
 */
export async function makeDirs(dir: string, maxNew = 16): Promise<boolean> {
  const missing: string[] = [];
  let at = path.resolve(dir);
  for (;;) {
    try {
      if ((await stat(at)).isDirectory()) break;
      throw new Error(`${at} is not a folder`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (missing.length >= maxNew) throw new Error(`${dir}: more than ${maxNew} folders to make`);
    missing.unshift(at);
    const parent = path.dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const d of missing) {
    try {
      await mkdir(d);
    } catch (err) {
      // Made meanwhile by a concurrent batch: fine, as long as it is a folder.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !(await stat(d)).isDirectory()) throw err;
    }
  }
  return missing.length > 0;
}
