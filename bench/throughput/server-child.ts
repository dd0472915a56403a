/** The tile server of bench:throughput in its own process (so it does not share the measured event loop). */
import { startDemoTileServer } from '../../src/demo/tile-server';

void startDemoTileServer({ latencyMs: Number(process.argv[2] ?? 0) }).then((s) => {
  process.stdout.write(`${s.url}\n`);
  process.on('disconnect', () => process.exit(0));
});
