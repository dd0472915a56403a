/**
 * Tile indices as runs of consecutive indices, `[first, count]`: what a run that continues as new carries of
 * the tiles still pending. A block whose server is down defers every tile, so its pending tiles are one run,
 * a few bytes, where the list would be up to 16,384 numbers in every carried input.
 */
import type { TileSelection } from './mosaic-types';

export type TileRuns = [number, number][];

/** Ascending, distinct indices as runs. */
export function toRuns(indices: readonly number[]): TileRuns {
  const runs: TileRuns = [];
  for (const i of indices) {
    const last = runs.at(-1);
    if (last && last[0] + last[1] === i) last[1]++;
    else runs.push([i, 1]);
  }
  return runs;
}

/** Runs as a selection: a range when they are one run, otherwise the list. */
export function runsSelection(runs: TileRuns): TileSelection {
  if (runs.length === 1) return { start: runs[0]![0], count: runs[0]![1] };
  const indices: number[] = [];
  for (const [first, count] of runs) for (let k = 0; k < count; k++) indices.push(first + k);
  return { indices };
}

/** A selection as runs. */
export function selectionRuns(sel: TileSelection): TileRuns {
  return 'indices' in sel ? toRuns(sel.indices) : sel.count > 0 ? [[sel.start, sel.count]] : [];
}

/** Runs one after another as one list, adjacent runs merged. */
export function concatRuns(parts: TileRuns[]): TileRuns {
  const out: TileRuns = [];
  for (const runs of parts) {
    for (const [first, count] of runs) {
      const last = out.at(-1);
      if (last && last[0] + last[1] === first) last[1] += count;
      else out.push([first, count]);
    }
  }
  return out;
}

/**
 * Carried runs as a run of the workflow may trust them: ascending, disjoint, within 0..total-1, at most `max`
 * tiles in all (anyone who can start a workflow can hand it runs of their own). Throws naming the field.
 */
export function checkRuns(runs: unknown, total: number, max: number, subject: string): TileRuns {
  if (!Array.isArray(runs)) throw new Error(`${subject}: must be a list of [first, count] runs (got ${typeof runs})`);
  let next = 0;
  let tiles = 0;
  for (const [k, run] of (runs as unknown[]).entries()) {
    const ok = Array.isArray(run) && run.length === 2 && run.every((v) => Number.isInteger(v));
    const [first, count] = ok ? (run as [number, number]) : [NaN, NaN];
    if (!ok || first < next || count < 1 || first + count > total) {
      throw new Error(
        `${subject}[${k}]: must be [first, count] with first >= ${next}, count >= 1 and first + count <= ${total} (got ${JSON.stringify(run)?.slice(0, 80)})`,
      );
    }
    next = first + count;
    tiles += count;
    if (tiles > max) throw new Error(`${subject}: more than ${max} tiles`);
  }
  return runs as TileRuns;
}
