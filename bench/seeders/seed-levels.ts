/**
 * The `seed-levels:` line of bench:seeders: the same area over three zoom levels (the tile set's zoom and the
 * two above it: 12-14 by default, 1,344 tiles), m x m metatiles with the same buffer, each tool into its own
 * cache format:
 *
 *   tilebreaker  `tilebreaker seed` as a user runs it: seedWorkflow on an embedded Temporal dev server (or the
 *                one TEMPORAL_ADDRESS names) with a worker in this process, the shared breaker on, each level a mosaic child into the tile store,
 *                then the pack into one MBTiles file; timed from the start to the result (the pack included)
 *   mapproxy     one `mapproxy-seed` with `levels: [z-2, z-1, z]` into its file cache
 *   mapcache     `mapcache_seed -z l,l` once per level into its disk cache, the times added: its metatile
 *                alignment adds a metatile row and column when an extent's edge is a multiple of m (see
 *                mapcache.ts), and the extent that compensates is a level's own
 *
 * CPU seconds are the tool's (for tilebreaker, this process: the client and the worker), MapServer's, and the rest
 * of the machine's (the Temporal dev server is there).
 *
 * tiles/s is the tiles of the three levels' sets stored (rows in the MBTiles file, files on disk) over the wall
 * seconds; a tool that did not store every tile of every level, or stored others, gets n/a.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import Database from 'better-sqlite3';
import { seedExitCode, startSeed } from '../../src/client/seeds';
import { metersToLonLat, tmsY } from '../../src/geo/mercator';
import { mapcacheExtent, mapcacheSeedArgs, writeMapcacheConfig } from './mapcache';
import { mapproxySeedArgs, writeMapproxyConfig } from './mapproxy';
import { startBenchTemporal } from '../outage/bench-temporal';
import type { CountingProxy } from './proxy';
import { machineBusySeconds, procCpuSeconds, scanTiles, spawnTimed, which } from './run';
import { seedExtent, tileCount, type TileSet } from './tileset';

export const SEED_TOOLS = ['tilebreaker', 'mapproxy', 'mapcache'] as const;
export type SeedTool = (typeof SEED_TOOLS)[number];

export interface SeedLevelsRun {
  tool: SeedTool;
  seconds: number;
  /** Tiles of the levels' sets stored, and tiles stored outside them. */
  stored: number;
  extra: number;
  ok: boolean;
  note: string;
  getMap: number;
  /** Most requests in flight at the proxy. */
  peak?: number;
  /** CPU seconds: the tool (for tilebreaker this process: client and worker), MapServer, and the rest of the machine (the Temporal dev server among it). */
  cpu: { tool: number; server: number; other: number };
}

/** The tile set of `ts`'s area at a level above it (a coarser zoom): the same area, 2^(z - level) times fewer tiles per side. */
export function levelSet(ts: TileSet, level: number): TileSet {
  const d = ts.z - level;
  return { z: level, xMin: ts.xMin >> d, xMax: ts.xMax >> d, yMin: ts.yMin >> d, yMax: ts.yMax >> d };
}

export interface SeedLevelsOptions {
  proxy: CountingProxy;
  layers: string;
  /** lighttpd's pid (its reaped children are every mapserv). */
  serverPid: number;
  /** The deepest level's tile set. */
  ts: TileSet;
  levels: number;
  concurrency: number;
  meta: number;
  buffer: number;
  work: string;
  tools: SeedTool[];
  log(line: string): void;
}

export async function seedLevels(o: SeedLevelsOptions): Promise<SeedLevelsRun[]> {
  const sets = Array.from({ length: o.levels }, (_, k) => levelSet(o.ts, o.ts.z - o.levels + 1 + k));
  const expected = sets.reduce((a, s) => a + tileCount(s), 0);
  const odd = sets.filter((s) => (s.xMax - s.xMin + 1) % o.meta !== 0);
  if (odd.length)
    o.log(
      `  seed-levels: z${odd.map((s) => s.z).join(', z')} not a whole number of ${o.meta}x${o.meta} metatiles: the tools may cut them differently`,
    );
  o.log(
    `  seed-levels: z${sets[0]!.z}-${o.ts.z}, ${sets.map((s) => `${s.xMax - s.xMin + 1}x${s.yMax - s.yMin + 1}`).join(' + ')} = ${expected} tiles, ` +
      `${o.meta}x${o.meta} metatiles, buffer ${o.buffer} px, concurrency ${o.concurrency}; tilebreaker into MBTiles (seed workflow, breaker on), mapproxy and mapcache into their file caches`,
  );
  const runs: SeedLevelsRun[] = [];
  const count = (root: string) => {
    let stored = 0;
    let total = 0;
    for (const s of sets) {
      const d = scanTiles(root, s);
      stored += d.inSet.size;
      total = d.total;
    }
    return { stored, extra: total - stored };
  };
  for (const tool of o.tools) {
    const dir = path.join(o.work, `seed-levels-${tool}`);
    mkdirSync(dir, { recursive: true });
    await o.proxy.reset();
    let server0 = procCpuSeconds(o.serverPid, true);
    let busy0 = machineBusySeconds();
    let self0 = process.cpuUsage();
    // tilebreaker's dev server and worker start untimed: the clocks, CPU ones too, restart at the seed's start.
    const restart = () => {
      server0 = procCpuSeconds(o.serverPid, true);
      busy0 = machineBusySeconds();
      self0 = process.cpuUsage();
    };
    let run: SeedLevelsRun;
    if (tool === 'tilebreaker') run = await tilebreaker(o, sets, dir, restart);
    else if (tool === 'mapproxy') {
      const cfg = writeMapproxyConfig({
        dir,
        wmsUrl: o.proxy.url,
        layers: o.layers,
        levels: sets.map((s) => s.z),
        extent: seedExtent(o.ts),
        metatile: { size: o.meta, buffer: o.buffer },
      });
      const t = await spawnTimed('mapproxy-seed', which('mapproxy-seed')!, mapproxySeedArgs(cfg, o.concurrency), dir);
      run = {
        tool,
        seconds: t.seconds,
        ...count(cfg.tileRoot),
        ok: t.code === 0,
        note: t.code === 0 ? '' : `exit ${t.code ?? t.signal}: ${t.tail}`,
        getMap: 0,
        cpu: { tool: t.cpu, server: 0, other: 0 },
      };
    } else {
      const cfg = writeMapcacheConfig({
        dir,
        wmsUrl: o.proxy.url,
        layers: o.layers,
        metatile: { size: o.meta, buffer: o.buffer },
      });
      let seconds = 0;
      let cpu = 0;
      let note = '';
      for (const s of sets) {
        const { extent } = mapcacheExtent(s, o.meta);
        const t = await spawnTimed(
          `mapcache_seed-z${s.z}`,
          which('mapcache_seed')!,
          mapcacheSeedArgs(cfg.xml, s, extent, o.concurrency, o.meta),
          dir,
        );
        seconds += t.seconds;
        cpu += t.cpu;
        if (t.code !== 0) note += `z${s.z} exit ${t.code ?? t.signal}: ${t.tail}; `;
      }
      run = {
        tool,
        seconds,
        ...count(cfg.tileRoot),
        ok: note === '',
        note,
        getMap: 0,
        cpu: { tool: cpu, server: 0, other: 0 },
      };
    }
    const stats = await o.proxy.stats();
    run.getMap = stats.getMap;
    run.peak = stats.peakInFlight;
    await new Promise((r) => setTimeout(r, 100)); // lighttpd reaps the last mapserv
    const self = process.cpuUsage(self0);
    if (tool === 'tilebreaker') run.cpu.tool = (self.user + self.system) / 1e6;
    run.cpu.server = procCpuSeconds(o.serverPid, true) - server0;
    run.cpu.other = Math.max(0, machineBusySeconds() - busy0 - run.cpu.tool - run.cpu.server);
    if (run.stored !== expected || run.extra !== 0) run.ok = false;
    runs.push(run);
    o.log(
      `  seed-levels ${tool.padEnd(11)} ${run.seconds.toFixed(1).padStart(6)} s  ${(run.stored / run.seconds).toFixed(1).padStart(6)} tiles/s  ${run.stored}/${expected} stored` +
        `${run.extra ? ` + ${run.extra} outside the set` : ''}, ${run.getMap} GetMaps (at most ${run.peak} at once), CPU s: tool ${run.cpu.tool.toFixed(1)} mapserv ${run.cpu.server.toFixed(1)} other ${run.cpu.other.toFixed(1)}${run.ok ? '' : '  FAILED'}${run.note ? ` (${run.note})` : ''}`,
    );
  }
  return runs;
}

let runtimeInstalled = false;

/** `tilebreaker seed` over the levels into MBTiles, on an embedded dev server; the server's start is not timed. */
async function tilebreaker(
  o: SeedLevelsOptions,
  sets: TileSet[],
  dir: string,
  restart: () => void,
): Promise<SeedLevelsRun> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('WARN') });
    runtimeInstalled = true;
  }
  const temporal = await startBenchTemporal('seed-levels', (m) => o.log(m), {
    roots: { sources: [dir], outputs: [dir] },
  });
  const { client, taskQueue } = temporal;
  const sources = path.join(dir, 'sources.yaml');
  writeFileSync(
    sources,
    JSON.stringify({
      sources: {
        bench: {
          type: 'wms',
          url: o.proxy.url,
          version: '1.1.1',
          layers: o.layers.split(','),
          format: 'image/png',
          transparent: false,
          concurrency: o.concurrency,
          metatile: { size: [o.meta, o.meta], buffer: o.buffer },
        },
      },
    }),
  );
  // The deepest set's bounds a quarter pixel inside, in degrees: at every level the tiles it touches are the set.
  const [minX, minY, maxX, maxY] = seedExtent(o.ts);
  const bbox = [...metersToLonLat(minX, minY), ...metersToLonLat(maxX, maxY)] as [number, number, number, number];
  const into = path.join(dir, 'bench.mbtiles');
  let run: SeedLevelsRun;
  try {
    restart();
    const started = performance.now();
    try {
      const handle = await startSeed(client, taskQueue, {
        sourcesFile: sources,
        sourceName: 'bench',
        bbox,
        levels: [sets[0]!.z, o.ts.z],
        into,
      });
      const result = await handle.result();
      const seconds = (performance.now() - started) / 1000;
      const db = new Database(into, { readonly: true });
      let stored = 0;
      let extra = 0;
      try {
        for (const row of db
          .prepare('SELECT zoom_level z, tile_column x, tile_row r FROM tiles')
          .iterate() as Iterable<{ z: number; x: number; r: number }>) {
          const s = sets.find((t) => t.z === row.z);
          const y = tmsY(row.z, row.r);
          if (s && row.x >= s.xMin && row.x <= s.xMax && y >= s.yMin && y <= s.yMax) stored++;
          else extra++;
        }
      } finally {
        db.close();
      }
      const exit = seedExitCode(result);
      // Where the time went: each level's child workflow, start to close, and what followed the last (the pack).
      const phases: string[] = [];
      let lastClose = 0;
      for (const s of sets) {
        const d = await client.workflow.getHandle(`${handle.workflowId}/z${s.z}`).describe();
        const close = d.closeTime?.getTime() ?? NaN;
        phases.push(`z${s.z} ${((close - d.startTime.getTime()) / 1000).toFixed(1)} s`);
        lastClose = Math.max(lastClose, close);
      }
      const seedClose = (await handle.describe()).closeTime?.getTime() ?? NaN;
      phases.push(`pack and close ${((seedClose - lastClose) / 1000).toFixed(1)} s`);
      run = {
        tool: 'tilebreaker',
        seconds,
        stored,
        extra,
        ok: exit === 0,
        note: [exit === 0 ? '' : `exit ${exit}, ${result.missing} missing`, phases.join(', ')]
          .filter(Boolean)
          .join('; '),
        getMap: 0,
        cpu: { tool: 0, server: 0, other: 0 },
      };
    } catch (err) {
      run = {
        tool: 'tilebreaker',
        seconds: (performance.now() - started) / 1000,
        stored: 0,
        extra: 0,
        ok: false,
        note: `threw: ${err instanceof Error ? err.message : String(err)}`,
        getMap: 0,
        cpu: { tool: 0, server: 0, other: 0 },
      };
    }
  } finally {
    await temporal.close((m) => o.log(`  seed-levels tilebreaker: the worker stopped with ${m}`));
  }
  return run;
}
