export { BreakerGuard, type CallOutcome, type GuardDecision, type GuardOptions, type GuardStats } from './guard';
