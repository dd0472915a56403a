import { createHash } from 'node:crypto';
import type { SourceConfig } from '../../sources/schema';
import type { Verdict } from './classify';

/**
 * A request-blaming ServiceException (LayerNotDefined, InvalidParameterValue, ...) means one of two things:
 * the source is misconfigured (a wrong layer name: it never worked), or the server lost something it served a
 * moment ago (a mapfile being redeployed: a systemic fault). What tells them apart is whether the same request,
 * minus the tile's own geometry, has succeeded recently: in this process, or, as the tile store records it for
 * the whole fleet and for later runs, within SERVED_RECORD_WITHIN_MS.
 */

/** A request-blaming fault for a shape that succeeded within this long is the server's, not the source's. */
export const SYSTEMIC_WITHIN_MS = 10 * 60_000;

/**
 * A request-blaming fault for a shape the tile store records served within this long is the server's too: a
 * nightly or weekly run after a redeploy, on a restarted worker. A week and a day, so a weekly schedule that
 * slips a little still counts; past it, a layer removed for good is the configuration's again.
 */
export const SERVED_RECORD_WITHIN_MS = 8 * 24 * 3_600_000;

/** How often a process rewrites a shape's record in a tile store: its first success, then at most this often. */
export const MARK_EVERY_MS = 10 * 60_000;

/** How long a record read from a tile store is believed without reading it again. */
const RECORD_READ_FOR_MS = 60_000;

/** Shapes remembered per process: far more than a worker's sources, and a bound on memory. */
const MAX_SHAPES = 4_096;

// The parameters that place one tile (GetMap) or one pixel (GetFeatureInfo): not part of the shape.
const GEOMETRY_PARAMS = new Set(['bbox', 'width', 'height', 'x', 'y', 'i', 'j']);

// Codes about the tile itself, not the request's shape: they stay per-tile permanent faults.
const PER_TILE_CODES = new Set(['tileoutofrange', 'invalidpoint']);

/**
 * The request minus the tile's own geometry: a WMS GetMap URL without BBOX/WIDTH/HEIGHT (and X/Y/I/J), or the
 * tile template (and layer, style, matrix set) of XYZ, TMS and WMTS. Only ever held in memory.
 */
export function requestShape(source: SourceConfig, unitUrl: string): string {
  if (source.type !== 'wms') {
    const extra =
      source.type === 'wmts-kvp'
        ? [source.layer, source.style, source.tileMatrixSet]
        : source.type === 'wmts-rest'
          ? [source.style, source.tileMatrixSet]
          : [];
    return [source.type, source.url, ...extra].join(' ');
  }
  const u = new URL(unitUrl);
  for (const k of [...u.searchParams.keys()]) if (GEOMETRY_PARAMS.has(k.toLowerCase())) u.searchParams.delete(k);
  return `wms ${u.toString()}`;
}

/**
 * A shape's name in a tile store's records: its sha256 hex. The shape itself is a URL whose template may carry
 * an API key, and is never written anywhere.
 */
export const shapeKey = (shape: string) => createHash('sha256').update(shape).digest('hex');

// Re-inserted, so a map's order is least recently set first and the oldest is evicted.
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_SHAPES) map.delete(map.keys().next().value!);
}

/**
 * When each request shape last succeeded, in this process (the clock is the caller's); and, per tile store
 * record (`where`: the store, the source and the shape), when this process last marked it and what a read of it
 * found.
 */
export class ShapeMemory {
  private readonly lastOk = new Map<string, number>();
  private readonly marks = new Map<string, number>();
  private readonly records = new Map<string, { at: number; readAt: number }>();

  succeeded(shape: string, now: number): void {
    remember(this.lastOk, shape, now);
  }

  /** True when the record at `where` is due a write (never marked, or MARK_EVERY_MS ago), and claims it. */
  claimMark(where: string, now: number): boolean {
    const last = this.marks.get(where);
    if (last !== undefined && now - last < MARK_EVERY_MS) return false;
    remember(this.marks, where, now);
    return true;
  }

  /** A claimed mark that could not be written: the next success tries again. */
  releaseMark(where: string): void {
    this.marks.delete(where);
  }

  /** A record read from the store that says the shape was served within SERVED_RECORD_WITHIN_MS. */
  noteRecord(where: string, at: number, now: number): void {
    if (now - at <= SERVED_RECORD_WITHIN_MS) remember(this.records, where, { at, readAt: now });
  }

  /** The time such a record gave, if it was read in the last minute and still says so; null otherwise. */
  recorded(where: string, now: number): number | null {
    const r = this.records.get(where);
    return r && now - r.readAt <= RECORD_READ_FOR_MS && now - r.at <= SERVED_RECORD_WITHIN_MS ? r.at : null;
  }

  /** The shape has succeeded at least once in this process. */
  served(shape: string): boolean {
    return this.lastOk.has(shape);
  }

  lastSuccess(shape: string): number | null {
    return this.lastOk.get(shape) ?? null;
  }
}

/** The process's memory, shared by every batch it runs. */
export const processShapes = new ShapeMemory();

/** A verdict whose ServiceException code blames the request's shape (not one tile). */
export function isRequestFault(v: Verdict): boolean {
  return (
    v.kind === 'permanent' && v.requestFault === true && !PER_TILE_CODES.has((v.exceptionCode ?? '').toLowerCase())
  );
}

export type Judgement = { verdict: Verdict; systemic: boolean; configError: boolean };

/** A request-blaming fault this process cannot judge by its own memory: the tile store's record is wanted. */
export function wantsRecord(verdict: Verdict, shape: string, memory: ShapeMemory, now: number): boolean {
  const last = memory.lastSuccess(shape);
  return isRequestFault(verdict) && !(last !== null && now - last <= SYSTEMIC_WITHIN_MS);
}

/** A duration as a person says it: 40 s, 12 min, 9 h, 3 d. */
function agoText(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

/** When a shape was last recorded served, and in which records (named in the verdict's reason). */
export interface ServedRecord {
  at: number;
  where: string;
}

/**
 * Judges a request-blaming fault: SYSTEMIC (reclassified `service-exception`: counted by the breaker, retried,
 * dead-lettered) when the shape succeeded within SYSTEMIC_WITHIN_MS of `now` in this process, or when the tile
 * store records it served (`recordedAt`, read by the caller) within SERVED_RECORD_WITHIN_MS; otherwise a
 * CONFIGURATION error (`configError`, reason "configuration error: ..." naming the code and the source). Other
 * verdicts pass.
 */
export function judgeRequestFault(
  verdict: Verdict,
  shape: string,
  memory: ShapeMemory,
  now: number,
  sourceName: string,
  record: ServedRecord | null = null,
): Judgement {
  const recordedAt = record?.at ?? null;
  const where = record?.where ?? 'the tile store';
  if (!isRequestFault(verdict)) return { verdict, systemic: false, configError: verdict.configError === true };
  const code = verdict.exceptionCode ?? 'request fault';
  const last = memory.lastSuccess(shape);
  if (last !== null && now - last <= SYSTEMIC_WITHIN_MS) {
    const ago = Math.round((now - last) / 1000);
    return {
      verdict: {
        ...verdict,
        kind: 'service-exception',
        reason: `systemic: ${code} for a request that succeeded ${ago} s ago (${verdict.reason})`,
      },
      systemic: true,
      configError: false,
    };
  }
  if (recordedAt !== null && now - recordedAt <= SERVED_RECORD_WITHIN_MS) {
    return {
      verdict: {
        ...verdict,
        kind: 'service-exception',
        reason: `systemic: ${code} for a request last served ${agoText(now - recordedAt)} ago (recorded in ${where}) (${verdict.reason})`,
      },
      systemic: true,
      configError: false,
    };
  }
  const stored =
    recordedAt === null
      ? 'the tile store has no record of it served'
      : `${where} last recorded it served ${agoText(now - recordedAt)} ago`;
  const never = `${last === null ? 'has not succeeded in this worker' : `last succeeded ${Math.round((now - last) / 60_000)} min ago`}; ${stored}`;
  return {
    verdict: {
      ...verdict,
      configError: true,
      reason: `configuration error: ${code} for source ${JSON.stringify(sourceName)} (its request ${never}): ${verdict.reason}`,
    },
    systemic: false,
    configError: true,
  };
}
