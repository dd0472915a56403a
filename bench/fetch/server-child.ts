/**
 * The tile server of bench:fetch, in its own process so it does not share the measured event loop: the demo
 * tile server (map-like 256 px PNG tiles for any /{z}/{x}/{y}.png on 127.0.0.1), with an optional render
 * time per tile (argv[2], ms). Prints its port and a tile's size on stdout.
 */
import { startDemoTileServer } from '../../src/demo/tile-server';

void startDemoTileServer({ latencyMs: Number(process.argv[2] ?? 0) }).then((s) => {
  process.stdout.write(`${new URL(s.url).port} ${s.tileBytes}\n`);
  process.on('disconnect', () => process.exit(0));
});
