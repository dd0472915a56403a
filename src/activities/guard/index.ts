// The worker-side breaker guard: what code around a protected call uses (see guard.ts).
export { BreakerGuard } from './guard';
export type { CallOutcome, GuardDecision, GuardOptions, GuardStats } from './types';
export { BreakerOpenedError, type StallOptions } from './in-flight';
export { processIdentity, witnessIdentity, WITNESS_ENV } from './reporter-id';
export { BreakerRefusedError, ContractBreachError, type RunCall, type RunOptions } from './run';
export { ChainExhaustedError, type ChainOptions, type ChainResult, type PassedOver, type Provider } from './chain';
export { classifyCall, type CallVerdict, type Settled } from './call-outcome';
