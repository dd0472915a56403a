// Following a running mosaic: its progress bar, the breakers it waits on, and the lines that say so.
import type { Client } from '@temporalio/client';
import { SingleBar } from 'cli-progress';
import { breakerWorkflowId } from '../../breaker';
import { liveCounts, watchMosaic, type MosaicStatus } from '../../client/mosaics';
import type { OutageOptions } from '../../client/server-wait';
import { viewQuery } from '../../messages/breaker';
import type { MosaicProgress } from '../../messages/mosaic-types';

/** Live breaker states of the mosaic's breakers, as `key=state`. */
export async function breakerLine(client: Client, keys: string[]): Promise<string> {
  const parts = await Promise.all(
    keys.map(async (k) => {
      const v = await client.workflow
        .getHandle(breakerWorkflowId(k))
        .query(viewQuery)
        .catch(() => null);
      return `${k} ${v ? v.state : 'no entity (closed)'}`;
    }),
  );
  return parts.join(', ') || 'no breaker';
}

/**
 * What a `wait` pass is waiting for, as one line that names each time it gives: `waiting for breaker <key>
 * (<state>): next try in N s; gives up at <deadline>` (the wait's deadline: past it, tiles still refused get
 * the after-deadline fallback, or stay dead-lettered in a re-drive), or null when it is not waiting on a breaker.
 */
export function waitingLine(p: Pick<MosaicProgress, 'waitingFor' | 'waitingUntil'>, now: number): string | null {
  const w = p.waitingFor;
  if (!w) return null;
  const next =
    p.waitingUntil !== null ? `next try in ${Math.max(0, Math.round((p.waitingUntil - now) / 1000))} s` : null;
  const deadline = w.deadlineAt !== null ? `gives up at ${new Date(w.deadlineAt).toISOString()}` : null;
  const times = [next, deadline].filter((t) => t !== null).join('; ');
  return `waiting for breaker ${w.key} (${w.state})${times ? `: ${times}` : ''}`;
}

/** The progress bar's phase: while a wait sleeps, when its next try is (the wait's deadline is waitingLine's). */
export function barPhase(p: Pick<MosaicProgress, 'phase' | 'waitingUntil'>): string {
  return p.waitingUntil
    ? `waiting for the breaker, next try at ${new Date(p.waitingUntil).toISOString().slice(11, 19)}Z`
    : p.phase;
}

/**
 * The waiting lines worth printing, one status read after another: a line when what is waited for changes
 * (breaker, state, deadline), not with every read nor every 1 s retry of a long outage; once tiles have been
 * settled since, a wait is news again.
 */
export function waitingLines(): (
  p: Pick<MosaicProgress, 'waitingFor' | 'waitingUntil' | 'done'>,
  now: number,
) => string | null {
  let last: string | null = null;
  let lastDone = -1;
  return (p, now) => {
    if (p.done !== lastDone) [lastDone, last] = [p.done, null];
    const w = p.waitingFor;
    const what = w ? JSON.stringify([w.key, w.state, w.deadlineAt]) : null;
    if (what === null || what === last) return null;
    last = what;
    return waitingLine(p, now);
  };
}

/** A watch goes on through a server restart, saying so on `stream` (stderr): docs/cli.md. */
export function outageLines(stream: NodeJS.WritableStream = process.stderr): Omit<OutageOptions, 'what'> {
  return { say: (line) => void stream.write(`tilebreaker: ${line}\n`) };
}

/** Shows a progress bar with counts by status and the breakers' states until the mosaic ends. */
export async function showMosaicProgress(
  client: Client,
  workflowId: string,
  opts: { intervalMs?: number; stream?: NodeJS.WriteStream } = {},
): Promise<MosaicStatus> {
  const stream = opts.stream ?? process.stderr;
  const bar = new SingleBar({
    format:
      '{bar} {value}/{total} | ok {ok} stale {stale} hole {hole} dead {dead} failed {failed} | {phase} | breaker {breaker} | ETA {etaText}',
    stream,
    hideCursor: true,
    noTTYOutput: true,
    notTTYSchedule: 5_000,
    barsize: 24,
  });
  let started = false;
  const waitingNews = waitingLines();
  const onStatus = async (s: MosaicStatus) => {
    const p: MosaicProgress | null = liveCounts(s);
    const line = p && waitingNews(p, Date.now());
    // On a terminal, the line goes over the bar's (redrawn on its next update).
    if (line) stream.write(`${stream.isTTY ? '\r\x1b[2K' : ''}${line}\n`);
    if (p) {
      const payload = {
        ok: p.counts.ok,
        stale: p.counts.stale,
        hole: p.counts.hole,
        dead: p.counts['dead-lettered'],
        failed: p.counts.failed,
        phase: barPhase(p),
        breaker: await breakerLine(client, p.breakerKeys),
        etaText: p.etaSeconds === null ? '-' : `${p.etaSeconds}s`,
      };
      if (!started) {
        bar.start(Math.max(1, p.total), p.done, payload);
        started = true;
      } else {
        bar.setTotal(Math.max(1, p.total));
        bar.update(p.done, payload);
      }
    }
    if (s.status !== 'RUNNING' && started) bar.stop();
  };
  return watchMosaic(client, workflowId, {
    onStatus,
    outages: outageLines(stream),
    ...(opts.intervalMs !== undefined ? { intervalMs: opts.intervalMs } : {}),
  });
}
