import type { TileAddress } from '../../sources/request-url';
import type { SourceConfig } from '../../sources/schema';
import type { GuardDecision } from '../guard';
import { credentialValues } from '../http/credentials';
import type { StoredTile, Tiles } from '../tile-store/tiles';
import { processShapes, requestShape, type ShapeMemory } from '../validate/shape-memory';
import type { FetchBatchInput, FetchDeps } from './batch-types';
import type { RequestUnit } from './metatiles';
import type { RetryPolicy } from './retry-policy';
import type { ServedRecords, ShapeRecord } from './served-records';

/** One unit to request (a tile, or the tiles of one metatile), and what its request goes through. */
export interface UnitRequest {
  deps: FetchDeps;
  /** Where the unit's request shape is recorded served: the tile store, and the source's ledger. */
  stores: ServedRecords;
  input: FetchBatchInput;
  unit: RequestUnit;
  /** The breaker key of the source's requests. */
  key: string;
  /** Whether each attempt goes through the breaker. */
  useBreaker: boolean;
  policy: RetryPolicy;
  /** Told each decision of the breaker's. */
  onDecision: (d: GuardDecision) => void;
  signal: AbortSignal | undefined;
  /** The requests made so far, counted as they go out: a caller reads it when the unit's request throws. */
  tried: { made: number };
  /** Told once the unit makes no further request: what is left is storing its answer. */
  answered?: () => void;
}

/** A unit's request, with what every attempt and step of it shares, worked out once before the first. */
export interface UnitCall extends UnitRequest {
  source: SourceConfig;
  store: Tiles;
  /** The unit's tiles, in member order. */
  tiles: TileAddress[];
  /** The credential values this unit sends, read once: masked wherever the server's answer is quoted. */
  secrets: readonly string[];
  shapes: ShapeMemory;
  now: () => number;
  /** The unit's request shape (shape-memory.ts). */
  shape: string;
  /** The stored copy a conditional request names, or null (not conditional, none stored, or a metatile). */
  conditional: StoredTile | null;
  answered: () => void;
}

/** Works out what a unit's request shares (reading the stored copy a conditional request names). */
export async function openUnitCall(req: UnitRequest): Promise<UnitCall> {
  const { source } = req.input;
  const store = req.stores.store;
  const tiles = req.unit.members.map((i) => req.input.tiles[i]!);
  // Conditional refreshes are per tile: a metatile is always fetched whole.
  // The credential values this unit sends, read once: masked wherever the server's answer is quoted.
  const secrets = credentialValues(source.auth);
  const single = req.unit.meta === null;
  const shapes = req.deps.shapes ?? processShapes;
  const now = req.deps.now ?? Date.now;
  const shape = requestShape(source, req.unit.url);
  const conditional = single && req.input.conditional ? await store.get(req.input.sourceName, tiles[0]!) : null;
  const answered = req.answered ?? (() => undefined);
  return { ...req, source, store, tiles, secrets, shapes, now, shape, conditional, answered };
}

/** The unit's request shape in the served records, as of `now`. */
export function shapeRecord(call: UnitCall, now: number): ShapeRecord {
  return { shapes: call.shapes, served: call.stores, sourceName: call.input.sourceName, shape: call.shape, now };
}
