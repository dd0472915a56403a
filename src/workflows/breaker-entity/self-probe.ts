import { log, proxyActivities, uuid4 } from '@temporalio/workflow';
import type { BreakerActivities } from '../../messages/activities';
import type { EntityOptions, ProbeSpec } from '../../messages/breaker';
import type { EntityState } from './state';

/**
 * The entity's own probe: when half-open and nobody has asked for a probe token for selfProbeDelayMs, it
 * takes a token itself and runs the probe activity against its probe spec, so a breaker never stays open
 * only because no traffic arrived.
 */
export class SelfProbe {
  running = false;
  // Self-probes that got no answer (404, 400, 429, activity failure) back off: a wrong probe URL must not
  // hit the endpoint every two seconds forever, and a 429 is honoured.
  private backoffMs = 0;

  constructor(
    private readonly entity: EntityState,
    private readonly opts: Required<EntityOptions>,
  ) {}

  /** When the next self-probe is due, or null: no spec, one running, not automatic half-open, or a token out. */
  due(): number | null {
    const { policy } = this.entity;
    if (
      !this.entity.probeSpec ||
      this.running ||
      policy.mode !== 'auto' ||
      policy.phase !== 'half-open' ||
      policy.probes.length > 0
    )
      return null;
    return this.entity.lastProbeActivityAt + this.opts.selfProbeDelayMs + this.backoffMs;
  }

  /** Starts a self-probe if one is due; the main loop does not wait for it. */
  startIfDue(): void {
    const spec = this.entity.probeSpec;
    const at = this.due();
    if (spec && at !== null && at <= Date.now()) void this.run(spec);
  }

  private async run(spec: ProbeSpec): Promise<void> {
    const { entity } = this;
    const { key } = entity;
    this.running = true;
    try {
      const requestId = `self-${uuid4()}`;
      const { decision } = entity.apply({ type: 'probe-request', requestId, requester: 'entity' });
      if (decision?.kind !== 'granted') return;
      entity.counters.selfProbes++;
      try {
        const result = await this.activity().probeEndpoint(spec);
        entity.apply({
          type: 'probe-result',
          generation: decision.token.generation,
          outcome: result.outcome,
          latencyMs: result.latencyMs,
          ...(result.retryAfterMs ? { retryAfterMs: result.retryAfterMs } : {}),
        });
        if (result.outcome === 'success' || result.outcome === 'transient' || result.outcome === 'service-exception') {
          this.backoffMs = 0;
        } else {
          // 404 / 400 / 401 / 429: no verdict on health. Say so loudly, and do not hammer the endpoint.
          this.backOff(result.retryAfterMs ?? 0);
          log.warn('self-probe got no verdict; check the probe spec', {
            key,
            url: spec.url,
            outcome: result.outcome,
            reason: result.reason,
            nextInMs: this.backoffMs,
          });
        }
      } catch (err) {
        // The probe activity itself failed (no worker, a crash): that says nothing about the endpoint.
        entity.apply({ type: 'probe-cancel', requestId });
        this.backOff();
        log.warn('self-probe activity failed; token released', {
          key,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    } finally {
      this.running = false;
      entity.lastProbeActivityAt = Date.now();
      entity.wake = true;
    }
  }

  private backOff(atLeastMs = 0): void {
    const { config } = this.entity.policy;
    const cap = config.cooldownMs * config.cooldownMaxFactor;
    this.backoffMs = Math.min(
      cap,
      Math.max(atLeastMs, this.backoffMs ? this.backoffMs * 2 : this.opts.selfProbeDelayMs),
    );
  }

  // Options follow the live configuration (a `configure` may change the lease).
  private activity() {
    const lease = this.entity.policy.config.probeLeaseMs;
    return proxyActivities<BreakerActivities>({
      // One attempt: a failed probe is an answer, and the next comes after the next cooldown.
      retry: { maximumAttempts: 1 },
      startToCloseTimeout: lease,
      // If no worker takes the probe, it gives up with the lease; traffic or a later self-probe tries again.
      scheduleToCloseTimeout: lease,
    });
  }
}
