import { Agent, errors, request } from 'undici';
import type { OutcomeKind } from '../../src/breaker/outcome';
import type { AttemptOutcome } from './retry';
import { looksLikePng } from './tile';
import type { AttemptError, AttemptRecord, ModeName } from './types';
import type { ModeRecorder } from './recorder';

/**
 * One simulated worker's HTTP client: its own undici Agent (so its own keep-alive connections, as a separate
 * worker process would have; no connection pool is shared between simulated workers), labels every request
 * with `x-sim-mode` / `x-sim-worker`, classifies the answer the pipeline's way, and records every attempt
 * client-side (refused connections included) in the mode's recorder.
 */
export class WorkerFetcher {
  private readonly agent: Agent;

  constructor(
    private readonly mode: ModeName,
    readonly worker: number,
    private readonly recorder: ModeRecorder,
  ) {
    this.agent = new Agent({
      connections: 2,
      keepAliveTimeout: 10_000,
      connect: { timeout: 2_000 },
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
    });
  }

  /** One attempt at one tile URL. Never throws: transport errors become outcomes. */
  async attempt(
    url: string,
    probe: boolean,
    signal?: AbortSignal,
    decision?: AttemptRecord['decision'],
  ): Promise<AttemptOutcome> {
    const start = this.recorder.attemptStarted();
    let status = 0;
    let error: AttemptError | null = null;
    let outcome: OutcomeKind;
    let retryAfterMs: number | undefined;
    try {
      const res = await request(url, {
        dispatcher: this.agent,
        method: 'GET',
        headers: {
          'x-sim-mode': this.mode,
          'x-sim-worker': String(this.worker),
          ...(probe ? { 'x-sim-probe': '1' } : {}),
        },
        ...(signal ? { signal } : {}),
      });
      status = res.statusCode;
      const body = Buffer.from(await res.body.arrayBuffer());
      retryAfterMs = parseRetryAfter(res.headers['retry-after']);
      outcome = classify(status, body);
    } catch (err) {
      error = signal?.aborted ? 'aborted' : transportError(err);
      // Aborted by the guard (the breaker opened while the call hung): not an answer from the server.
      outcome = error === 'aborted' ? 'neutral' : 'transient';
    }
    const end = this.recorder.attemptFinished();
    const record: AttemptRecord = {
      worker: this.worker,
      start,
      end,
      status,
      error,
      outcome,
      probe,
      ...(decision ? { decision } : {}),
    };
    this.recorder.attempts.push(record);
    return { kind: outcome, latencyMs: end - start, error, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

/** The outcome classification (ARCHITECTURE.md), for what this server can answer. */
export function classify(status: number, body: Buffer): OutcomeKind {
  if (status === 200) return looksLikePng(body) ? 'success' : 'service-exception';
  if (status === 429) return 'rate-limited';
  if (status >= 500) return 'transient';
  if (status === 404 || status === 204 || status === 401 || status === 403) return 'neutral';
  if (status >= 400) return 'permanent';
  return 'service-exception';
}

function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function transportError(err: unknown): AttemptError {
  const code = (err as { code?: string } | null)?.code;
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || err instanceof errors.SocketError) return 'reset';
  if (
    err instanceof errors.ConnectTimeoutError ||
    err instanceof errors.HeadersTimeoutError ||
    err instanceof errors.BodyTimeoutError
  ) {
    return 'timeout';
  }
  return 'error';
}
