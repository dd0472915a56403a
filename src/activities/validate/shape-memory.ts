import type { SourceConfig } from '../../sources/schema';
import type { Verdict } from './classify';

/**
 * A request-blaming ServiceException (LayerNotDefined, InvalidParameterValue, ...) means one of two things:
 * the source is misconfigured (a wrong layer name: it never worked), or the server lost something it served a
 * moment ago (a mapfile being redeployed: a systemic fault). What tells them apart is whether the same request,
 * minus the tile's own geometry, has succeeded recently.
 */

/** A request-blaming fault for a shape that succeeded within this long is the server's, not the source's. */
export const SYSTEMIC_WITHIN_MS = 10 * 60_000;

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
    const extra = source.type === 'wmts-kvp' ? [source.layer, source.style, source.tileMatrixSet] : source.type === 'wmts-rest' ? [source.style, source.tileMatrixSet] : [];
    return [source.type, source.url, ...extra].join(' ');
  }
  const u = new URL(unitUrl);
  for (const k of [...u.searchParams.keys()]) if (GEOMETRY_PARAMS.has(k.toLowerCase())) u.searchParams.delete(k);
  return `wms ${u.toString()}`;
}

/** When each request shape last succeeded, in this process (the clock is the caller's). */
export class ShapeMemory {
  private readonly lastOk = new Map<string, number>();

  succeeded(shape: string, now: number): void {
    // Re-inserted, so the map's order is least recently successful first and the oldest is evicted.
    this.lastOk.delete(shape);
    this.lastOk.set(shape, now);
    if (this.lastOk.size > MAX_SHAPES) this.lastOk.delete(this.lastOk.keys().next().value!);
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
  return v.kind === 'permanent' && v.requestFault === true && !PER_TILE_CODES.has((v.exceptionCode ?? '').toLowerCase());
}

export type Judgement = { verdict: Verdict; systemic: boolean; configError: boolean };

/**
 * Judges a request-blaming fault: SYSTEMIC (reclassified `service-exception`: counted by the breaker, retried,
 * dead-lettered) when the shape succeeded within SYSTEMIC_WITHIN_MS of `now`; otherwise a CONFIGURATION error
 * (`configError`, reason "configuration error: ..." naming the code and the source). Other verdicts pass.
 */
export function judgeRequestFault(verdict: Verdict, shape: string, memory: ShapeMemory, now: number, sourceName: string): Judgement {
  if (!isRequestFault(verdict)) return { verdict, systemic: false, configError: verdict.configError === true };
  const code = verdict.exceptionCode ?? 'request fault';
  const last = memory.lastSuccess(shape);
  if (last !== null && now - last <= SYSTEMIC_WITHIN_MS) {
    const ago = Math.round((now - last) / 1000);
    return {
      verdict: { ...verdict, kind: 'service-exception', reason: `systemic: ${code} for a request that succeeded ${ago} s ago (${verdict.reason})` },
      systemic: true,
      configError: false,
    };
  }
  const never = last === null ? 'has not succeeded in this worker' : `last succeeded ${Math.round((now - last) / 60_000)} min ago`;
  return {
    verdict: { ...verdict, configError: true, reason: `configuration error: ${code} for source ${JSON.stringify(sourceName)} (its request ${never}): ${verdict.reason}` },
    systemic: false,
    configError: true,
  };
}
