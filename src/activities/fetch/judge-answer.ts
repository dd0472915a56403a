/** Classifying an answer: its verdict, and what the metrics, the shape's memory and the breaker learn from it. */
import { classify, type Verdict } from '../validate/classify';
import { judgeRequestFault, wantsRecord } from '../validate/shape-memory';
import type { Exchanged } from './send-request';
import { recordedServed } from './served-records';
import { shapeRecord, type UnitCall } from './unit-call';

/** A unit's request that went out, and its answer. */
export interface Answer {
  call: UnitCall;
  sent: Exchanged;
}

/** With keepChunks, a metatile's answer is stored whole (one chunk image), not cut into tiles. */
export function keptWhole({ unit, input }: Pick<UnitCall, 'unit' | 'input'>): boolean {
  return unit.meta !== null && input.keepChunks === true;
}

/** A 304 to a conditional request: a success for the metrics, the shape's memory and the breaker. */
export function countNotModified({ call, sent: { x, decision } }: Answer): void {
  const { deps, input, key, shapes, shape, now } = call;
  deps.metrics?.request(input.sourceName, key, 'success', x.latencyMs / 1000);
  shapes.succeeded(shape, now());
  if (decision) deps.guard!.release(decision, { kind: 'success', latencyMs: x.latencyMs });
}

/**
 * The answer's verdict, counted: in the metrics, the shape's memory, the breaker (and a good tile's URL taught
 * to the entity as its self-probe).
 */
export async function judgeAnswer({ call, sent: { x, decision, deadline, lease } }: Answer): Promise<Verdict> {
  const { deps, input, source, unit, key, secrets, shapes, shape, now } = call;
  // The whole response is validated; the breaker counts this one request, whatever the number of tiles.
  const chunk = keptWhole(call);
  const classified = await classify(x, {
    width: unit.width,
    height: unit.height,
    blankIsFailure: source.blankTiles === 'fail',
    keepPixels: unit.meta !== null && !chunk,
    secrets,
  });
  // A request-blaming fault: systemic if this request shape succeeded lately (in this process, or as the tile
  // store records it for the fleet and earlier runs), otherwise the configuration's. The store is read only
  // for such a fault that this process's memory cannot judge: rare.
  const judgedAt = now();
  const recordedAt = wantsRecord(classified, shape, shapes, judgedAt)
    ? await recordedServed(shapeRecord(call, judgedAt))
    : null;
  const judged = judgeRequestFault(classified, shape, shapes, judgedAt, input.sourceName, recordedAt);
  let verdict = judged.verdict;
  deps.metrics?.request(input.sourceName, key, verdict.kind, x.latencyMs / 1000);
  if (lease?.aborted && !deadline.aborted && verdict.kind === 'transient') {
    verdict = {
      ...verdict,
      reason: `probe stopped before its lease ended (${Math.round(x.latencyMs)} ms): ${verdict.reason}`,
    };
  }
  if (verdict.kind === 'success') shapes.succeeded(shape, now());
  // A good tile's URL is the entity's self-probe (a URL this worker fetches anyway). The spec is stored in the
  // entity's history: a source with credentials or extra headers is named by its sources file instead, and the
  // probe reads them there on the worker (without a sources file, it gets no self-probe).
  if (verdict.kind === 'success' && decision) {
    const plain = !source.auth && !Object.keys(source.headers).length;
    if (plain) deps.guard!.learnProbe?.(key, unit.url, source.userAgent);
    else if (input.sourcesFile !== undefined)
      deps.guard!.learnProbe?.(key, unit.url, source.userAgent, { file: input.sourcesFile, name: input.sourceName });
  }
  // A configuration error says nothing about the endpoint's health: never counted toward the host's breaker.
  const counted = judged.configError ? 'neutral' : verdict.kind;
  if (decision)
    deps.guard!.release(decision, {
      kind: counted,
      latencyMs: verdict.latencyMs,
      ...(verdict.retryAfterMs !== undefined ? { retryAfterMs: verdict.retryAfterMs } : {}),
    });
  return verdict;
}
