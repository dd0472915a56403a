/** The breaker policy: pure, deterministic, no I/O, no clock, no randomness of its own. */
export * from './config';
export * from './config-error';
export * from './cooldown';
export * from './latency';
export * from './migrate';
export * from './outcome';
export * from './permit';
export * from './policy';
export * from './quorum';
export * from './rules';
export * from './state';
export * from './view';
export * from './window';
export * from './window-pack';
export * from './key';
