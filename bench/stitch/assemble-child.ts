/**
 * One assembly in a process of its own, so its peak RSS is its own: reads the plan named by argv[2], assembles
 * it, prints `{ "seconds": ..., "maxRssMb": ..., "ok": ... }` on stdout.
 */
import { readFileSync } from 'node:fs';
import { assembleMosaic } from '../../src/activities/mosaic/assemble';
import type { MosaicPlan } from '../../src/messages/mosaic-types';

async function main(): Promise<void> {
  const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as MosaicPlan;
  const t0 = performance.now();
  const result = await assembleMosaic({ plan, partial: false });
  const seconds = (performance.now() - t0) / 1000;
  // ru_maxrss is in KiB on Linux.
  process.stdout.write(
    `${JSON.stringify({ seconds, maxRssMb: process.resourceUsage().maxRSS / 1024, ok: result.counts.ok })}\n`,
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
