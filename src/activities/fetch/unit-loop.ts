/**
 * The batch's loops: each takes the next unit, keeps it from the store or requests it (a shape never served
 * one unit at a time, at most the allowed share of the source's concurrency in flight), and records its tiles.
 */
import type { GuardDecision } from '../guard';
import { processShapes, requestShape, type ShapeMemory } from '../validate/shape-memory';
import type { TileResult } from './batch-types';
import { beat, halted, PULSE_MS, type BatchRun } from './batch-run';
import { keptFresh } from './kept-fresh';
import type { RequestUnit } from './metatiles';
import { fetchUnit } from './request-unit';
import { recordOf } from './served-records';
import { sleep } from './sleep';

/** Configuration errors for one request shape after which a batch stops requesting it. */
export const CONFIG_ERRORS_TO_STOP = 3;

/** What the loops learn of each request shape while the batch runs. */
interface Shapes {
  memory: ShapeMemory;
  now: () => number;
  /**
   * A shape whose request the breaker refused made no request to learn from, and one a mirror served is not
   * failing for its configuration: its units need not go one by one (with mirrors, each such unit is fetched
   * from a mirror, which must not be serialised behind the others).
   */
  refused: Set<string>;
  /** Shapes whose one unit is being requested alone. */
  probing: Set<string>;
  configErrors: Map<string, number>;
  /** Shapes no longer requested, and why. */
  stopped: Map<string, string>;
}

/** The loops' shared state: the batch, its shapes, and where the breaker's decisions go. */
interface Loops {
  run: BatchRun;
  shapes: Shapes;
  onDecision: (d: GuardDecision) => void;
}

/** Runs the batch's loops until every unit is taken or the batch is halted, heartbeating meanwhile. */
export async function runUnits(run: BatchRun): Promise<void> {
  const { ctx, deps, lease, results, input } = run;
  // A shape never served in this process is requested one unit at a time (a wrong layer costs a few requests,
  // not `concurrency` of them), and no more after CONFIG_ERRORS_TO_STOP configuration errors. The store is not
  // read for that: once a fault has it read and it records the shape served, the fault is systemic and the
  // rest go at full concurrency, as many as the breaker lets through.
  const shapes: Shapes = {
    memory: deps.shapes ?? processShapes,
    now: deps.now ?? Date.now,
    refused: new Set<string>(),
    probing: new Set<string>(),
    configErrors: new Map<string, number>(),
    stopped: new Map<string, string>(),
  };
  const onDecision = (d: GuardDecision) => {
    if (d.kind === 'proceed') run.allowance = d.allowance;
  };
  const loops: Loops = { run, shapes, onDecision };
  // Also beat while no tile finishes (one slow tile at concurrency 1, a wait for a connection slot or the
  // breaker), well within the batch's short heartbeat timeout, so only a lost worker's batch is retried.
  const pulse = ctx ? setInterval(() => beat(run, true), PULSE_MS) : null;
  // The first confirmation goes out before any request: an attempt the server has already given up on learns it at once.
  lease?.beat({ results });
  try {
    // Twice as many loops as requests allowed in flight: while one stores its tiles (a PUT to a bucket takes
    // as long as a request), another requests; `active` still bounds the requests.
    await Promise.all(Array.from({ length: 2 * Math.max(1, input.source.concurrency) }, () => unitLoop(loops)));
  } finally {
    if (pulse) clearInterval(pulse);
  }
}

/** One loop: takes unit after unit until none is left or the batch is halted. */
async function unitLoop(loops: Loops): Promise<void> {
  const { run } = loops;
  for (;;) {
    const u = run.next++;
    if (u >= run.units.length) return;
    const unit = run.units[u]!;
    if (unit.members.every((i) => run.results[i])) continue;
    if (halted(run)) return;
    if (!(await takeUnit(loops, unit))) return;
  }
}

/** A shape this batch need not request one unit at a time: refused or mirrored here, or served before. */
function known({ run, shapes }: Loops, shape: string): boolean {
  const { served, input } = run;
  return (
    shapes.refused.has(shape) ||
    shapes.memory.served(shape) ||
    [served.store, served.ledger].some(
      (t) => t !== null && shapes.memory.recorded(recordOf(t, input.sourceName, shape), shapes.now()) !== null,
    )
  );
}

/** One unit: kept from the store, failed for its stopped shape, or requested in its turn. False: halted. */
async function takeUnit(loops: Loops, unit: RequestUnit): Promise<boolean> {
  const { run, shapes } = loops;
  const { input, results, keepSince, keepWhy } = run;
  if (
    keepSince !== undefined &&
    (await keptFresh({
      store: run.served.store,
      input,
      members: unit.members,
      since: keepSince,
      results,
      why: keepWhy,
    }))
  ) {
    beat(run);
    return true;
  }
  const shape = requestShape(input.source, unit.url);
  while (!known(loops, shape) && shapes.probing.has(shape) && !shapes.stopped.has(shape) && !halted(run))
    await sleep(50);
  if (halted(run)) return false;
  const stop = shapes.stopped.get(shape);
  if (stop !== undefined) {
    for (const i of unit.members)
      results[i] ??= {
        ...input.tiles[i]!,
        status: 'failed',
        kind: 'permanent',
        configError: true,
        attempts: 0,
        reason: stop,
      };
    return true;
  }
  const solo = !known(loops, shape);
  if (solo) shapes.probing.add(shape);
  // Woken as soon as a request answers; the timer also notices the ramp's allowance growing.
  while (run.active >= Math.max(1, Math.ceil(input.source.concurrency * run.allowance)))
    await new Promise<void>((r) => (run.waiters.push(r), setTimeout(r, 50)));
  if (halted(run)) {
    if (solo) shapes.probing.delete(shape);
    return false;
  }
  await requestInTurn(loops, unit, shape, solo);
  beat(run);
  return true;
}

/** Requests a unit, counted in flight, and records its tiles; `solo`: the shape's one unit being requested. */
async function requestInTurn(loops: Loops, unit: RequestUnit, shape: string, solo: boolean): Promise<void> {
  const { run, shapes } = loops;
  run.active++;
  // Counted in flight until its last answer is in; storing it (a disk or a bucket) is not a request.
  let requesting = true;
  const answered = () => {
    if (requesting) {
      run.active--;
      run.waiters.shift()?.();
    }
    requesting = false;
  };
  try {
    const out = await fetchUnit({
      deps: run.deps,
      stores: run.served,
      input: run.input,
      unit,
      key: run.key,
      useBreaker: run.useBreaker,
      policy: run.policy,
      onDecision: loops.onDecision,
      signal: run.ctx?.cancellationSignal,
      tried: { made: 0 },
      answered,
    });
    record(loops, unit, shape, out);
  } finally {
    answered();
    if (solo) shapes.probing.delete(shape);
  }
}

/** Records a unit's tiles (none when cancelled), and what they tell of its shape. */
function record({ run, shapes }: Loops, unit: RequestUnit, shape: string, out: TileResult[] | null): void {
  const { results, resume } = run;
  if (out) {
    unit.members.forEach((i, k) => (results[i] = out[k]!));
    resume.onFinished?.(unit.members, results);
    if (out.some((r) => (r.breakerState !== undefined && r.attempts === 0) || r.tier !== undefined))
      shapes.refused.add(shape);
  }
  const configError = out?.find((r) => r.configError && r.attempts > 0);
  if (configError) {
    const n = (shapes.configErrors.get(shape) ?? 0) + 1;
    shapes.configErrors.set(shape, n);
    if (n >= CONFIG_ERRORS_TO_STOP)
      shapes.stopped.set(shape, `${configError.reason}; not requested after ${n} configuration errors`);
  }
}
