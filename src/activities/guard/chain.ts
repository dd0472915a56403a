import type { OutcomeKind } from '../../breaker';
import { maskSecretsInText } from '../../breaker/redact';
import { BreakerRefusedError, ContractBreachError, runOnce, type RunCall, type RunHost, type RunOptions } from './run';

/** One provider of a chain: its own breaker key, its call, and what its answers must satisfy. */
export interface Provider<T> {
  /** Its breaker's key (a named key such as `geocoder:primary`, or an endpoint URL's key). */
  key: string;
  /** How it is named in results, errors and the fallback metric. Default: its key. */
  name?: string;
  call: (call: RunCall) => Promise<T>;
  /** As `run`'s; a provider's own contract, else the chain's. */
  contract?: RunOptions<T>['contract'];
  /** As `run`'s; a provider's own, else the chain's. */
  classify?: RunOptions<T>['classify'];
}

export interface ChainOptions<T> extends Omit<RunOptions<T>, 'name'> {
  /** The `source` label of the chain's request and fallback metrics. Default `chain`. */
  name?: string;
}

/** Why a provider before the one that answered was passed over. */
export interface PassedOver {
  provider: string;
  /** refused (its breaker), failed (an error or a failing answer), or breach (its answer broke the contract). */
  why: 'refused' | 'failed' | 'breach';
  detail: string;
  /** For a refusal: when its breaker may let calls through again (null: no known end). */
  retryAfterMs?: number | null;
}

export interface ChainResult<T> {
  value: T;
  /** The provider that answered (its name), and its place in the chain (0: the first). */
  provider: string;
  index: number;
  /** The providers before it and why each was passed over: empty when the first answered. */
  passedOver: PassedOver[];
}

/** No provider gave an answer that holds: each one's reason, and the soonest a refusing breaker may allow calls. */
export class ChainExhaustedError extends Error {
  override readonly name = 'ChainExhaustedError';
  constructor(
    readonly passedOver: PassedOver[],
    readonly retryAfterMs: number | null,
  ) {
    super(`no provider answered: ${passedOver.map((p) => `${p.provider} ${p.why} (${p.detail})`).join('; ')}`);
  }
}

/**
 * Each provider in order, each behind its own breaker: the first whose breaker lets the call through and whose
 * answer is served (not a failure) and holds to the contract is returned. A provider is passed over when its
 * breaker refuses, its call fails or its answer breaks the contract; a later provider is never asked while an
 * earlier one can answer, so a fast fallback serving the wrong thing is never preferred to a correct primary.
 * A cancellation ends the chain at once.
 */
export async function runChain<T>(
  host: RunHost & { fallback(name: string, key: string): void },
  providers: readonly Provider<T>[],
  o: ChainOptions<T> = {},
): Promise<ChainResult<T>> {
  if (providers.length === 0) throw new Error('runChain: providers must name at least one provider (got none)');
  const passedOver: PassedOver[] = [];
  const name = o.name ?? 'chain';
  for (const [index, p] of providers.entries()) {
    const provider = p.name ?? p.key;
    const contract = p.contract ?? o.contract;
    const classify = p.classify ?? o.classify;
    let got: { value: T; kind: OutcomeKind };
    try {
      got = await runOnce(host, p.key, p.call, {
        ...o,
        name,
        ...(contract ? { contract } : {}),
        ...(classify ? { classify } : {}),
      });
    } catch (err) {
      if (o.signal?.aborted) throw err;
      if (err instanceof BreakerRefusedError)
        passedOver.push({
          provider,
          why: 'refused',
          detail: `breaker ${err.state}: ${err.reason}`,
          retryAfterMs: err.retryAfterMs,
        });
      else if (err instanceof ContractBreachError)
        passedOver.push({ provider, why: 'breach', detail: maskSecretsInText(err.why).slice(0, 500) });
      else passedOver.push({ provider, why: 'failed', detail: describe(err) });
      continue;
    }
    if (got.kind !== 'success' && got.kind !== 'neutral') {
      passedOver.push({ provider, why: 'failed', detail: `answered ${got.kind}` });
      continue;
    }
    if (index > 0) host.fallback(name, providers[0]!.key);
    return { value: got.value, provider, index, passedOver };
  }
  const waits = passedOver
    .filter((p) => p.why === 'refused' && typeof p.retryAfterMs === 'number')
    .map((p) => p.retryAfterMs as number);
  throw new ChainExhaustedError(passedOver, waits.length ? Math.min(...waits) : null);
}

/** An error's name and the start of its message: a caller's error text is theirs, kept short. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return 'threw a non-error value';
  const code = (err as { code?: unknown }).code;
  // Masked as any quoted text: a message may carry a URL with its key.
  return maskSecretsInText(`${err.name}${typeof code === 'string' ? ` ${code}` : ''}: ${err.message}`).slice(0, 200);
}
