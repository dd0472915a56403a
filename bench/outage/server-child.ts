/**
 * The outage tile server as a child process (forked by server-client.ts), so its event loop and its counting
 * do not share a CPU with the simulated workers. Messages: parent -> child `start` (an OutagePlan) and
 * `stats`; child -> parent `ready` (the port), `started` (the schedule), `stats`.
 */
import { OutageTileServer, type OutagePlan } from './server';
import { makeTilePng } from './tile';

type FromParent = { type: 'start'; plan: OutagePlan } | { type: 'stats' } | { type: 'close' };

async function main(): Promise<void> {
  const tileLatencyMs = Number(process.env.OUTAGE_TILE_LATENCY_MS ?? '0');
  const server = new OutageTileServer({ tile: await makeTilePng(), tileLatencyMs });
  const port = await server.listen();
  const send = (msg: unknown) => process.send?.(msg);
  process.on('message', (msg: FromParent) => {
    try {
      if (msg.type === 'start') send({ type: 'started', schedule: server.start(msg.plan) });
      else if (msg.type === 'stats') send({ type: 'stats', stats: server.stats() });
      else if (msg.type === 'close') void server.close().then(() => process.exit(0));
    } catch (err) {
      send({ type: 'error', message: err instanceof Error ? err.message : String(err) });
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', port });
}

main().catch((err: unknown) => {
  console.error('outage server:', err);
  process.exit(1);
});
