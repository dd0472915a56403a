import type { ProbeSource, ProbeSpec } from '../../messages/breaker';
import { probeSpecSchema } from '../../messages/breaker-validation';
import { LearnedProbes } from './learned-probes';
import type { ResolvedGuardOptions } from './types';

/**
 * The self-probe spec this process gives each key's entity: the options', else one learned from its own
 * successful fetches (learned-probes.ts says what is kept). One the entity would refuse is left out.
 */
export class SelfProbes {
  private readonly learned = new LearnedProbes();
  private readonly badProbes = new Set<string>();

  constructor(private readonly o: Pick<ResolvedGuardOptions, 'probe' | 'learnProbes' | 'logger'>) {}

  /**
   * A URL this process fetched from `key`'s endpoint with success: learned unless the options name a probe or
   * turn learning off. `source`: the sources file and source whose credentials or headers it was sent with.
   */
  learn(key: string, url: string, userAgent?: string, source?: ProbeSource): void {
    if (this.o.probe === undefined && this.o.learnProbes !== false) this.learned.learn(key, url, userAgent, source);
  }

  /**
   * The self-probe spec this process gives `key`'s entity: the options', else one learned from its fetches. One
   * the entity would refuse (a report carrying it would be refused whole) is left out, and said once.
   */
  specFor(key: string): ProbeSpec | undefined {
    const probe = (typeof this.o.probe === 'function' ? this.o.probe(key) : this.o.probe) ?? this.learned.spec(key);
    if (!probe) return undefined;
    const checked = probeSpecSchema.safeParse(probe);
    if (checked.success) return probe;
    if (!this.badProbes.has(key)) {
      this.badProbes.add(key);
      this.o.logger.warn('self-probe spec left out: the entity would refuse it', {
        key,
        issues: checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      });
    }
    return undefined;
  }
}
