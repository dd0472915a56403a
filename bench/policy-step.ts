#!/usr/bin/env node
/**
 * bench:policy-step: what one `report` costs the breaker entity's workflow task, in CPU.
 * Each report signal runs the pure policy's `step` once (src/breaker), so its cost bounds how many reports a
 * workflow task can apply before it runs long. Measured on a full window: the default configuration, and the
 * largest the configuration schema allows (600 buckets, the fast window as long as the window), with a dense
 * latency histogram in every bucket. Prints one line per configuration:
 *   `step: config=<name> buckets=<int> us-per-report=<float>`
 */
import {
  histogramOf,
  parsePolicyConfig,
  step,
  initialState,
  type PolicyConfigInput,
  type PolicyState,
} from '../src/breaker';

const T0 = Date.UTC(2001, 0, 1);

function measure(name: string, input: PolicyConfigInput): void {
  const config = parsePolicyConfig(input);
  let s: PolicyState = initialState(config);
  // Mostly successes (it must not trip), every latency bucket used.
  const latency = histogramOf(Array.from({ length: 60 }, (_, i) => 1.2 ** i));
  const buckets = Math.floor(config.windowMs / config.bucketMs);
  let now = T0;
  for (let i = 0; i < buckets; i++, now += config.bucketMs)
    s = step(s, { type: 'report', counts: { success: 60 }, latency }, now, 0.5).state;
  const reports = 2_000;
  const started = process.hrtime.bigint();
  for (let i = 0; i < reports; i++) {
    now += config.bucketMs / 20;
    s = step(s, { type: 'report', counts: { success: 3 }, latency }, now, 0.5).state;
  }
  const us = Number(process.hrtime.bigint() - started) / 1_000 / reports;
  if (s.phase !== 'closed') throw new Error(`the ${name} run tripped; the figures would mean nothing`);
  console.log(`step: config=${name} buckets=${s.window.length} us-per-report=${us.toFixed(1)}`);
}

measure('default', {});
measure('largest', { windowMs: 3_600_000, bucketMs: 6_000, fastWindowMs: 3_600_000, minSamples: 1_000_000 });
measure('fine-600', { windowMs: 60_000, bucketMs: 100, fastWindowMs: 60_000, minSamples: 1_000_000 });
