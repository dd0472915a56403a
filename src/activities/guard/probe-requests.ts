import type { ProbeDecision } from '../../breaker';
import { cancelProbeSignal, probeDecisionQuery, probeResultSignal, requestProbeSignal } from '../../messages/breaker';
import type { EntityLink } from './entity-link';
import type { CallOutcome, GuardDecision, GuardStats, ResolvedGuardOptions } from './types';
import type { ViewCache } from './view-cache';

type ProbeGrant = Extract<GuardDecision, { kind: 'probe' }>;

/** A process whose probe of a key succeeded this recently asks for the round's next token at once. */
export const NEXT_PROBE_WITHIN_MS = 2_000;

/**
 * The half-open probe token: asked for by signal, one request per process and key at a time, its decision
 * read back by query; the probe's outcome handed back at once, since the fleet waits on it. Its answer goes
 * back through the decision (decide.ts), and the guard counts a refusal once, there.
 */
export class ProbeRequests {
  private readonly pending = new Map<string, Promise<GuardDecision>>();
  /** Per key, this process's last successful probe: when, and its result's signal on its way. */
  private readonly succeeded = new Map<string, { at: number; sent: Promise<unknown> }>();
  private seq = 0;

  constructor(
    private readonly o: Pick<ResolvedGuardOptions, 'reporter' | 'rpcTimeoutMs' | 'probePollMs' | 'cacheTtlMs'>,
    private readonly link: EntityLink,
    private readonly views: ViewCache,
    private readonly stats: GuardStats,
  ) {}

  /** This process is already asking for `key`'s token. */
  asking(key: string): boolean {
    return this.pending.has(key);
  }

  /**
   * This process's probe of `key` succeeded moments ago: the round may need another, and this process asks for
   * it at once, behind its own result, instead of waiting for a view that shows the token free (a second or
   * more per probe, while the endpoint may be back).
   */
  nextProbe(key: string, now: number): boolean {
    const s = this.succeeded.get(key);
    return s !== undefined && now - s.at < NEXT_PROBE_WITHIN_MS;
  }

  /** Asks for `key`'s token; the decision the entity gave, or a refusal if it could not give one in time. */
  request(key: string): Promise<GuardDecision> {
    // The next probe of a round asks behind the last one's result (signals reach the entity in order), so
    // the entity has freed the token when it decides.
    const behind = this.succeeded.get(key);
    this.succeeded.delete(key);
    const decision = (behind ? behind.sent.then(() => this.ask(key)) : this.ask(key)).finally(() => {
      this.pending.delete(key);
    });
    this.pending.set(key, decision);
    return decision;
  }

  /** Sends the probe's outcome; the state is re-read after it. */
  result(decision: ProbeGrant, outcome: CallOutcome): void {
    this.views.invalidate(decision.key);
    const sent = this.link.report(decision.key, (h) =>
      h.signal(probeResultSignal, {
        generation: decision.token.generation,
        outcome: outcome.kind,
        reporter: this.o.reporter,
        ...(outcome.latencyMs !== undefined ? { latencyMs: outcome.latencyMs } : {}),
        ...(outcome.retryAfterMs ? { retryAfterMs: outcome.retryAfterMs } : {}),
      }),
    );
    this.link.track(sent);
    if (outcome.kind === 'success')
      this.succeeded.set(decision.key, { at: Date.now(), sent: sent.catch(() => undefined) });
    else this.succeeded.delete(decision.key);
  }

  private async ask(key: string): Promise<GuardDecision> {
    const requestId = `${this.o.reporter}/${Date.now()}/${++this.seq}`;
    const deadline = Date.now() + this.o.rpcTimeoutMs;
    try {
      await this.link.rpc(() =>
        this.link.handle(key).signal(requestProbeSignal, { requestId, requester: this.o.reporter }),
      );
    } catch (err) {
      // The state was just read (half-open: the endpoint is not known to be healthy), so this is a slow or
      // briefly unavailable server, not a lost coordination store: refuse and ask again shortly. If Temporal is
      // really gone, the next read fails and the guard fails open then.
      this.link.noteUnreachable(key, err);
      return {
        kind: 'refused',
        key,
        state: 'half-open',
        retryAfterMs: this.o.cacheTtlMs,
        reason: 'half-open: the probe request did not reach the entity',
      };
    }
    // The decision is usually there on the first read; back off (5, 10, 20 ... 100 ms) while it is not.
    let pause = this.o.probePollMs;
    while (Date.now() < deadline) {
      const decision = await this.link
        .rpc(() => this.link.handle(key).query(probeDecisionQuery, requestId))
        .catch(() => null);
      if (decision) {
        this.views.invalidate(key); // the state moved: read it afresh next time
        return this.fromDecision(key, decision);
      }
      await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(0, deadline - Date.now()))));
      pause = Math.min(pause * 2, 100);
    }
    // The entity is too slow to answer. Give the token back if it was granted (so it does not sit out its
    // lease), and do not call: half-open means the endpoint is not known to be healthy.
    this.link.track(this.link.signal(key, (h) => h.signal(cancelProbeSignal, { requestId })));
    return {
      kind: 'refused',
      key,
      state: 'half-open',
      retryAfterMs: this.o.cacheTtlMs,
      reason: `half-open: no probe decision within ${this.o.rpcTimeoutMs} ms`,
    };
  }

  private fromDecision(key: string, d: ProbeDecision): GuardDecision {
    switch (d.kind) {
      case 'granted':
        this.stats.probesGranted++;
        return { kind: 'probe', key, token: d.token };
      case 'not-needed':
        return { kind: 'proceed', key, state: d.state, allowance: 1, failOpen: false };
      case 'denied':
        return {
          kind: 'refused',
          key,
          state: d.reason === 'busy' ? 'half-open' : d.reason,
          // A busy token frees when its holder reports; look again soon rather than after the whole lease.
          retryAfterMs:
            d.reason === 'busy' ? Math.min(d.retryAfterMs ?? this.o.cacheTtlMs, this.o.cacheTtlMs) : d.retryAfterMs,
          reason: d.reason === 'busy' ? 'half-open: another worker holds the probe token' : `breaker ${d.reason}`,
        };
    }
  }
}
