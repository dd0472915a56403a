// The worker-side breaker guard (see guard/guard.ts); this path is the stable import for users and tools.
export * from './guard/index';
