import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readdir, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { TileAddress } from '../../sources/request-url';
import type { TileResult, TileStatus } from '../fetch/fetch-batch';
import { isObjectUrl, joinLocation } from '../storage/location';
import { storageFor, type Storage } from '../storage/storage';

/**
 * A fetch batch's results as they finish, outside Temporal: `<journal dir>/<batch id>.checkpoint`, one line
 * appended per finished request (after its tiles are stored), so a retried attempt resumes from every tile an
 * earlier one finished, however long Temporal was unreachable and however the worker died (a line torn by a
 * crash is skipped: its tiles are fetched again). Not a journal: `readJournals` reads `.json` files only, so
 * neither a manifest nor a re-drive ever counts it; the assembly removes a run's checkpoints. Each line names its owner (the workflow run: a
 * batch id is unique within one, and a batch that moves to another task queue keeps it), so a leftover of
 * another run is never believed; anyone who can write the folder is
 * untrusted, so the fetch checks a resumed tile's file as it does a heartbeat's.
 */
export interface Checkpoint {
  load(tiles: readonly TileAddress[], opts?: LoadOptions): Promise<(TileResult | null)[]>;
  append(indices: readonly number[], results: readonly (TileResult | null)[]): void;
  close(): Promise<void>;
}

export interface LoadOptions {
  /**
   * Called at least every LOAD_BEAT_MS of loading (as each object is read): a bucket checkpoint of a long
   * attempt is many objects, and the load comes before the batch's own heartbeats.
   */
  heartbeat?: () => void;
  now?: () => number;
}

/** How often a load heartbeats: well within the batch's 6 s heartbeat timeout. */
export const LOAD_BEAT_MS = 1_000;
/** Objects of a bucket checkpoint read at once. */
export const LOAD_READS = 16;

/** The checkpoint of `batchId` for `owner` (its workflow run): a file appended to, or objects in a bucket. */
export function openCheckpoint(
  dir: string,
  batchId: string,
  owner: string,
  warn: (why: string) => void,
): Promise<Checkpoint> {
  return isObjectUrl(dir)
    ? Promise.resolve(ObjectCheckpoint.open(dir, batchId, owner, warn))
    : BatchCheckpoint.open(dir, batchId, owner, warn);
}

export class BatchCheckpoint implements Checkpoint {
  private fh: FileHandle | null = null;
  private writing: Promise<void> = Promise.resolve();
  private failed = false;

  private constructor(
    readonly file: string,
    private readonly owner: string,
  ) {}

  /** The checkpoint of `batchId` for `owner` (its workflow run), to append to. */
  static async open(
    dir: string,
    batchId: string,
    owner: string,
    warn: (why: string) => void,
  ): Promise<BatchCheckpoint> {
    if (!/^[\w.-]+$/.test(batchId))
      throw new Error(`checkpoint: batch id must be a simple name (got ${JSON.stringify(batchId)})`);
    const c = new BatchCheckpoint(path.join(dir, `${batchId}.checkpoint`), owner);
    try {
      // Never through a symlink: the folder is the plan's, confined; a link in it could lead anywhere.
      c.fh = await open(
        c.file,
        constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW,
        0o644,
      );
    } catch (err) {
      // Best effort: without it the batch still runs, resuming from heartbeats only.
      c.failed = true;
      warn(
        `checkpoint ${path.basename(c.file)} cannot be written (${(err as NodeJS.ErrnoException).code ?? 'error'}): a retry resumes from heartbeats only`,
      );
    }
    return c;
  }

  /**
   * What earlier attempts recorded for `tiles`, position by position (null where nothing is known): only lines
   * of this owner, only records of the tile at that position.
   */
  async load(tiles: readonly TileAddress[], _opts?: LoadOptions): Promise<(TileResult | null)[]> {
    const out: (TileResult | null)[] = tiles.map(() => null);
    let text: string;
    let fh: FileHandle | null = null;
    try {
      fh = await open(this.file, constants.O_RDONLY | constants.O_NOFOLLOW);
      const { size } = await fh.stat();
      // A batch's lines are a few hundred bytes a tile: anything far larger is not ours.
      if (size > MAX_BYTES) return out;
      text = (await fh.readFile()).toString('utf8');
    } catch {
      return out;
    } finally {
      await fh?.close();
    }
    readLines(text, this.owner, tiles, out);
    return out;
  }

  /** Appends the results of tiles `indices` (positions in the batch), in order with earlier appends. */
  append(indices: readonly number[], results: readonly (TileResult | null)[]): void {
    if (!this.fh || this.failed) return;
    const at = indices.flatMap((k) => (results[k] ? [[k, results[k]]] : []));
    if (at.length === 0) return;
    const line = `${JSON.stringify({ owner: this.owner, at })}\n`;
    const fh = this.fh;
    this.writing = this.writing.then(() =>
      fh.write(line).then(
        () => undefined,
        () => {
          // A full disk: later lines could follow a torn one; stop, the heartbeats still carry the results.
          this.failed = true;
        },
      ),
    );
  }

  /** Waits for the appends so far and closes the file. */
  async close(): Promise<void> {
    await this.writing;
    const fh = this.fh;
    this.fh = null;
    await fh?.close().catch(() => undefined);
  }
}

/**
 * The same in a bucket, where nothing can be appended to: what finished is gathered for up to a second and
 * written as one object, `<batch id>.checkpoint/<attempt>-<n>.jsonl`, so a batch costs a PUT a second at
 * most; a retry lists them all and reads LOAD_READS at a time, heartbeating as it goes (a 30-minute attempt
 * leaves 1,800). A SIGKILL loses at most that second's records (a retry finds their tiles in the store).
 */
export class ObjectCheckpoint implements Checkpoint {
  private pending: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private seq = 0;
  private failed = false;
  private readonly attempt = `${Date.now()}-${randomUUID().slice(0, 8)}`;

  private constructor(
    private readonly prefix: string,
    private readonly owner: string,
    private readonly warn: (why: string) => void,
    private readonly given: Storage | undefined,
  ) {}

  private get storage(): Storage {
    return this.given ?? storageFor(this.prefix);
  }

  /** `storage`: the bucket's (tests pass their own). */
  static open(
    dir: string,
    batchId: string,
    owner: string,
    warn: (why: string) => void,
    storage?: Storage,
  ): ObjectCheckpoint {
    if (!/^[\w.-]+$/.test(batchId))
      throw new Error(`checkpoint: batch id must be a simple name (got ${JSON.stringify(batchId)})`);
    const prefix = joinLocation(dir, `${batchId}.checkpoint`);
    return new ObjectCheckpoint(prefix, owner, warn, storage);
  }

  async load(tiles: readonly TileAddress[], opts: LoadOptions = {}): Promise<(TileResult | null)[]> {
    const out: (TileResult | null)[] = tiles.map(() => null);
    const now = opts.now ?? Date.now;
    let beatAt = now();
    const pulse = () => {
      if (!opts.heartbeat || now() - beatAt < LOAD_BEAT_MS) return;
      beatAt = now();
      opts.heartbeat();
    };
    try {
      // Oldest attempt first, in write order: a later record of a tile replaces an earlier one.
      const names = (await this.storage.listFiles(this.prefix))
        .filter((n) => n.endsWith('.jsonl'))
        .sort(byAttemptAndSeq);
      pulse();
      // A long attempt leaves one object a second: read a few at a time, in order of the names, stopping
      // once they add up to more than any batch writes.
      const bodies: (Buffer | null | undefined)[] = names.map(() => undefined);
      let next = 0;
      let bytes = 0;
      let failed = false;
      const reader = async () => {
        while (!failed && next < names.length && bytes <= MAX_BYTES) {
          const k = next++;
          try {
            bodies[k] = await this.storage.read(joinLocation(this.prefix, names[k]!));
          } catch (err) {
            failed = true; // the other readers stop too
            throw err;
          }
          if (failed) return; // the load is over: no heartbeat after it
          bytes += bodies[k]?.length ?? 0;
          pulse();
        }
      };
      await Promise.all(Array.from({ length: Math.min(LOAD_READS, names.length) }, reader));
      let used = 0;
      for (const body of bodies) {
        if (body === undefined) break; // not read: past the limit
        if (body === null) continue;
        used += body.length;
        if (used > MAX_BYTES) break;
        readLines(body.toString('utf8'), this.owner, tiles, out);
      }
      if (names.length > 1 && used <= MAX_BYTES && bodies.every((b) => b instanceof Buffer))
        await this.compact(names, bodies as Buffer[], pulse);
    } catch (err) {
      this.warn(`checkpoint ${this.prefix} cannot be read (${(err as Error).name}): resuming from heartbeats only`);
    }
    return out;
  }

  /**
   * The objects a load read, as one, so the next retry reads one: written where the last of them sorts, then
   * they are removed. An attempt still writing keeps its later objects (never listed here, so never removed),
   * and a load that found an object gone (another attempt compacting the same ones) does not compact.
   */
  private async compact(names: readonly string[], bodies: readonly Buffer[], pulse: () => void): Promise<void> {
    const last = names[names.length - 1]!;
    const merged = last.endsWith(MERGED) ? last : `${last.slice(0, -'.jsonl'.length)}${MERGED}`;
    // Every line whole, whoever's it is: this merge loses nothing any owner could read.
    const text = Buffer.concat(
      bodies.flatMap((b) => (b.length > 0 && b[b.length - 1] !== 0x0a ? [b, Buffer.from('\n')] : [b])),
    );
    try {
      await this.storage.write(joinLocation(this.prefix, merged), text, { contentType: 'application/x-ndjson' });
      pulse();
      await this.storage.remove(names.filter((n) => n !== merged).map((n) => joinLocation(this.prefix, n)));
      pulse();
    } catch (err) {
      this.warn(
        `checkpoint ${this.prefix} cannot be compacted (${(err as Error).name}): a retry reads its objects again`,
      );
    }
  }

  append(indices: readonly number[], results: readonly (TileResult | null)[]): void {
    if (this.failed) return;
    const at = indices.flatMap((k) => (results[k] ? [[k, results[k]]] : []));
    if (at.length === 0) return;
    this.pending.push(JSON.stringify({ owner: this.owner, at }));
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  async close(): Promise<void> {
    // Lines a failed write put back get one more try here: once closed, no timer writes them.
    for (let i = 0; i < 2 && (i === 0 || this.pending.length > 0); i++) {
      this.flush();
      await this.writing;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.length === 0) return;
    const lines = this.pending;
    this.pending = [];
    const loc = joinLocation(this.prefix, `${this.attempt}-${String(this.seq++).padStart(6, '0')}.jsonl`);
    this.writing = this.writing.then(() =>
      this.storage
        .write(loc, Buffer.from(`${lines.join('\n')}\n`), { contentType: 'application/x-ndjson' })
        .catch((err: unknown) => {
          // The bucket stayed away past the client's retries: these lines go again, first, with the next
          // object (a later record of a tile still follows an earlier one). Given up only past what a batch writes.
          this.pending = [...lines, ...this.pending];
          if (this.pending.reduce((n, l) => n + l.length, 0) > MAX_BYTES) {
            this.failed = true;
            this.pending = [];
            this.warn(
              `checkpoint ${this.prefix} cannot be written (${(err as Error).message}): a retry resumes from heartbeats only`,
            );
            return;
          }
          this.warn(`checkpoint ${this.prefix} not written yet (${(err as Error).message}): tried again with the next`);
          this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
        }),
    );
  }
}

const FLUSH_MS = 1_000;
/** A compacted checkpoint object: `<the last object it holds>-merged.jsonl`, so it sorts where that one did. */
const MERGED = '-merged.jsonl';

/** `<ms>-<id>-<n>.jsonl`: attempts by start time, then objects in write order. */
function byAttemptAndSeq(a: string, b: string): number {
  const ta = Number(a.split('-')[0]);
  const tb = Number(b.split('-')[0]);
  return ta - tb || (a < b ? -1 : a > b ? 1 : 0);
}

/** Records of `owner` for the tile at each position, into `out` (a later line replaces an earlier one). */
function readLines(text: string, owner: string, tiles: readonly TileAddress[], out: (TileResult | null)[]): void {
  for (const line of text.split('\n')) {
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch {
      continue; // empty, or torn by a crash
    }
    const r = rec as { owner?: unknown; at?: unknown };
    if (r.owner !== owner || !Array.isArray(r.at)) continue;
    for (const e of r.at as unknown[]) {
      const [k, t] = Array.isArray(e) ? (e as [unknown, unknown]) : [];
      if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= tiles.length) continue;
      if (wellFormed(t, tiles[k]!)) out[k] = t;
    }
  }
}

/** A run's checkpoints, once its manifest is written: every batch's journal holds what they told. */
export async function removeCheckpoints(dir: string): Promise<void> {
  if (isObjectUrl(dir)) {
    const storage = storageFor(dir);
    const names = await storage.list(dir);
    await Promise.all(
      names.filter((n) => n.endsWith('.checkpoint')).map((n) => storage.removeTree(joinLocation(dir, n))),
    );
    return;
  }
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(names.filter((n) => n.endsWith('.checkpoint')).map((n) => rm(path.join(dir, n), { force: true })));
}

const MAX_BYTES = 64 * 1024 * 1024;
const STATUSES: ReadonlySet<TileStatus> = new Set(['ok', 'stale', 'hole', 'deferred', 'failed']);

/** A result of `tile`, shaped as the fetch writes one (a forged line may say anything). */
function wellFormed(t: unknown, tile: TileAddress): t is TileResult {
  if (typeof t !== 'object' || t === null) return false;
  const r = t as Partial<TileResult>;
  return (
    r.z === tile.z &&
    r.x === tile.x &&
    r.y === tile.y &&
    STATUSES.has(r.status as TileStatus) &&
    typeof r.reason === 'string' &&
    typeof r.attempts === 'number' &&
    Number.isInteger(r.attempts) &&
    r.attempts >= 0 &&
    // A tile served (ok, or a stale copy) is a stored file: without its path the batch would believe a tile
    // it cannot draw.
    (r.status === 'ok' || r.status === 'stale'
      ? typeof r.path === 'string'
      : r.path === undefined || typeof r.path === 'string')
  );
}
