/**
 * The served records of a source's request shapes: in the tile store, and in the source's ledger under the
 * output root (served-ledger.ts). They tell a fault of a shape served before (systemic) from a configuration
 * error, across workers and runs.
 */
import type { Tiles } from '../tile-store/tiles';
import { shapeKey, type ShapeMemory } from '../validate/shape-memory';

/** A shape's served record in a tile store, as this process's memory names it. */
export const recordOf = (store: Tiles, sourceName: string, shape: string) => `${store.root}\n${sourceName}\n${shape}`;

/** The stores a shape's served record is written to and read from: the tile store, and the source's ledger. */
export interface ServedRecords {
  store: Tiles;
  ledger: Tiles | null;
}

/** One request shape of one source, in the served records, as of `now` (ms). */
export interface ShapeRecord {
  shapes: ShapeMemory;
  served: ServedRecords;
  sourceName: string;
  shape: string;
  now: number;
}

/**
 * Records that the shape was served, in the tile store and in the ledger under the output root: on its first
 * success in this process, then at most every MARK_EVERY_MS each, so it costs nothing per tile. A write that
 * fails costs only the record (the next success tries again): the tiles were stored, or not, on their own.
 */
export async function markServed({ shapes, served, sourceName, shape, now }: ShapeRecord): Promise<void> {
  for (const t of [served.store, served.ledger]) {
    if (t === null) continue;
    const where = recordOf(t, sourceName, shape);
    if (!shapes.claimMark(where, now)) continue;
    try {
      await t.markServed(sourceName, shapeKey(shape), now);
    } catch {
      shapes.releaseMark(where);
    }
  }
}

/**
 * When the shape was last recorded served, and where: the tile store's record, else the ledger's (a read of the
 * last minute that found one is not repeated); null when neither has one.
 */
export async function recordedServed({
  shapes,
  served,
  sourceName,
  shape,
  now,
}: ShapeRecord): Promise<{ at: number; where: string } | null> {
  let latest: { at: number; where: string } | null = null;
  for (const [t, where] of [
    [served.store, 'the tile store'],
    [served.ledger, 'the records under the output root'],
  ] as const) {
    if (t === null) continue;
    const name = recordOf(t, sourceName, shape);
    let at = shapes.recorded(name, now);
    if (at === null) {
      // The ledger is a second opinion: one that cannot be read is none (the tile store's errors stand).
      const read = t.servedAt(sourceName, shapeKey(shape));
      at = await (t === served.ledger ? read.catch(() => null) : read);
      if (at !== null) shapes.noteRecord(name, at, now);
    }
    if (at !== null && (latest === null || at > latest.at)) latest = { at, where };
  }
  return latest;
}
