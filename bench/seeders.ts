/**
 * bench:seeders: tilebreaker against the usual seeders, in one run, on one tile set, at one concurrency.
 *
 * MapServer 8 (cgi-mapserver) behind lighttpd on 127.0.0.1 serves a generated fixture (bench/seeders/wms.ts:
 * a raster at the tiles' own resolution with gradient, noise, rings and hairlines, and roads, areas and
 * labelled places over it), a counting proxy (own process) stands in front of it, and every tool seeds the
 * same 32 x 32 tiles of 256 px in EPSG:3857 through the proxy:
 *
 *   tilebreaker-meta   tilebreaker's fetch path (bench/seeders/tilebreaker-seed.ts), m x m metatiles, buffer b
 *   mapproxy-meta      mapproxy-seed -c N, meta_size [m, m], meta_buffer b
 *   mapcache-meta      mapcache_seed -n N, <metatile>m m</metatile>, <metabuffer>b</metabuffer>
 *   tilebreaker-1x1    one GetMap per tile
 *   mapproxy-1x1       meta_size [1, 1], meta_buffer 0
 *   mapcache-1x1       <metatile>1 1</metatile>, <metabuffer>0</metabuffer>
 *
 * The buffer is one value for all (default 80 px, MapProxy's default meta_buffer; mapcache's default is 0), and
 * the tile set is aligned to its side (32), so with m dividing it the metatile GetMaps are the same in every tool.
 * For each run it prints wall seconds (spawn to exit for the external tools, the call for tilebreaker), tiles/s
 * (tiles of the set on disk / seconds), GetMap and other requests, the peak of requests in flight at the proxy
 * and of mapserv processes under lighttpd, bytes served, CPU seconds of the tool, of MapServer and of the proxy,
 * and the GetMap sizes asked for; the tiles each wrote are counted on disk against the set (extra ones are
 * reported, not hidden); then 16 random tiles are decoded and compared pixel by pixel between tilebreaker and
 * each other tool of the same mode. Where tiles differ, each tool's own GetMap is sent again straight to
 * lighttpd to tell a tool that changed pixels from a server that draws two requests differently.
 *
 * Needs Debian's cgi-mapserver, lighttpd, gdal-bin, mapproxy and mapcache-tools (not installed by CI: benchmarks
 * do not run there).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { resolution, tileBounds } from '../src/geo/mercator';
import { attribute } from './seeders/attribute';
import { decode, diff, type Decoded } from './seeders/compare';
import { mapcacheExtent, mapcacheSeedArgs, writeMapcacheConfig } from './seeders/mapcache';
import { mapproxySeedArgs, writeMapproxyConfig } from './seeders/mapproxy';
import { startCountingProxy, type CountingProxy, type ProxyStats } from './seeders/proxy';
import { machineBusySeconds, procCpuSeconds, scanTiles, spawnTimed, which, type OnDisk } from './seeders/run';
import { SEED_TOOLS, seedLevels, type SeedLevelsRun, type SeedTool } from './seeders/seed-levels';
import { seedWithTilebreaker } from './seeders/tilebreaker-seed';
import { chooseTileSet, seedExtent, tileCount, tileKey, tilesOf, type TileSet } from './seeders/tileset';
import { prng } from '../test/helpers/prng';
import { missingWmsPackages, startBenchWms } from './seeders/wms';
import { endOnSignals } from '../src/demo/children';

interface Opts {
  concurrency: string;
  zoom: string;
  side: string;
  meta: string;
  buffer: string;
  tools: string;
  sample: string;
  rounds: string;
  seedLevels: string;
  keep?: boolean;
}

const TOOLS = [
  'tilebreaker-meta',
  'mapproxy-meta',
  'mapcache-meta',
  'tilebreaker-1x1',
  'mapproxy-1x1',
  'mapcache-1x1',
] as const;
type Tool = (typeof TOOLS)[number];
const FINAL: Tool[] = ['tilebreaker-meta', 'mapproxy-meta', 'mapcache-meta', 'tilebreaker-1x1', 'mapproxy-1x1'];

interface Result {
  tool: Tool;
  /** 1-based; with --rounds, every tool runs once per round. */
  round: number;
  seconds: number;
  ok: boolean;
  note: string;
  disk: OnDisk;
  stats: ProxyStats;
  /**
   * CPU seconds: the tool (all its processes/threads), MapServer (lighttpd + every mapserv), the proxy, and the
   * rest of the machine (busy time in /proc/stat minus those three: other work competing for the cores).
   */
  cpu: { tool: number; server: number; proxy: number; other: number };
  /** The tile set's tiles: key -> file. */
  files: Map<string, string>;
}

const mode = (t: Tool) => (t.endsWith('-meta') ? 'meta' : '1x1');
const family = (t: Tool) => t.split('-')[0]!;

function selectTools(spec: string): Tool[] {
  const want = new Set<Tool>();
  for (const raw of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const hits = raw === 'all' ? [...TOOLS] : TOOLS.filter((t) => t === raw || family(t) === raw || mode(t) === raw);
    if (!hits.length)
      throw new Error(
        `--tools: unknown ${JSON.stringify(raw)} (one of ${TOOLS.join(', ')}, a family: tilebreaker, mapproxy, mapcache, a mode: meta, 1x1, or all)`,
      );
    hits.forEach((t) => want.add(t));
  }
  return TOOLS.filter((t) => want.has(t));
}

/** The Debian packages missing for the selected tools; the bench refuses to start without them. */
function missingPackages(tools: Tool[]): string[] {
  const missing = missingWmsPackages();
  if (tools.some((t) => family(t) === 'mapproxy') && !which('mapproxy-seed')) missing.push('mapproxy');
  if (tools.some((t) => family(t) === 'mapcache') && !which('mapcache_seed')) missing.push('mapcache-tools');
  return missing;
}

function getMapUrl(base: string, layers: string, bbox: [number, number, number, number], px: number): string {
  const q = new URLSearchParams({
    SERVICE: 'WMS',
    VERSION: '1.1.1',
    REQUEST: 'GetMap',
    LAYERS: layers,
    STYLES: '',
    SRS: 'EPSG:3857',
    BBOX: bbox.join(','),
    WIDTH: String(px),
    HEIGHT: String(px),
    FORMAT: 'image/png',
    TRANSPARENT: 'FALSE',
  });
  return `${base}?${q.toString()}`;
}

/**
 * What one GetMap costs this MapServer, and whether `concurrency` requests really run at once behind lighttpd:
 * tiles one after the other, then the same number at the bench's concurrency, then one metatile. Warms the
 * page cache and the proxy's connections too, so the first tool measured is not the one that pays for it.
 */
async function calibrate(
  proxy: CountingProxy,
  layers: string,
  ts: TileSet,
  concurrency: number,
  meta: number,
  buffer: number,
): Promise<string[]> {
  const tile = (i: number) => {
    const x = ts.xMin + ((i * 7) % (ts.xMax - ts.xMin + 1));
    const y = ts.yMin + ((i * 5) % (ts.yMax - ts.yMin + 1));
    const b = tileBounds(ts.z, x, y);
    return getMapUrl(proxy.url, layers, [b.minX, b.minY, b.maxX, b.maxY], 256);
  };
  const get = async (url: string) => {
    const res = await fetch(url);
    const body = Buffer.from(await res.arrayBuffer());
    if (!String(res.headers.get('content-type')).startsWith('image/'))
      throw new Error(`calibration GetMap failed: ${res.status} ${body.toString('utf8', 0, 300)}`);
    return body.length;
  };
  const n = Math.max(8, concurrency * 4);
  await get(tile(0)); // warm-up, unmeasured
  await proxy.reset();
  let t = performance.now();
  for (let i = 0; i < n; i++) await get(tile(i));
  const seqMs = (performance.now() - t) / n;
  await proxy.reset();
  t = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < n; i = next++) await get(tile(i + n));
    }),
  );
  const parWall = performance.now() - t;
  const par = await proxy.stats();
  const r = resolution(ts.z) * buffer;
  const a = tileBounds(ts.z, ts.xMin, ts.yMin);
  const c = tileBounds(ts.z, ts.xMin + meta - 1, ts.yMin + meta - 1);
  const metaPx = meta * 256 + 2 * buffer;
  await get(getMapUrl(proxy.url, layers, [a.minX - r, c.minY - r, c.maxX + r, a.maxY + r], metaPx)); // warm
  t = performance.now();
  const metaBytes = await get(getMapUrl(proxy.url, layers, [a.minX - r, c.minY - r, c.maxX + r, a.maxY + r], metaPx));
  const metaMs = performance.now() - t;
  return [
    `MapServer per GetMap (CGI: one mapserv process per request): 256 px ${seqMs.toFixed(0)} ms one at a time (${(1000 / seqMs).toFixed(1)}/s); ` +
      `${metaPx} px metatile ${metaMs.toFixed(0)} ms (${(metaBytes / 1e6).toFixed(2)} MB)`,
    `at concurrency ${concurrency}: ${n} tiles in ${(parWall / 1000).toFixed(2)} s = ${((n / parWall) * 1000).toFixed(1)}/s, ` +
      `${((seqMs * n) / parWall).toFixed(2)}x one at a time; peak in flight at the proxy ${par.peakInFlight}, mapserv processes running at once ${par.peakMapserv} (the ceiling is the ${cpus().length} cores)`,
  ];
}

async function main(opts: Opts): Promise<void> {
  const concurrency = Number(opts.concurrency);
  const meta = Number(opts.meta);
  const buffer = Number(opts.buffer);
  const sample = Number(opts.sample);
  const rounds = Number(opts.rounds);
  const levelsCount = Number(opts.seedLevels);
  if (!Number.isInteger(levelsCount) || levelsCount < 0 || levelsCount > 4)
    throw new Error(`--seed-levels must be an integer 0..4 (got ${JSON.stringify(opts.seedLevels)})`);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 9)
    throw new Error(`--rounds must be an integer 1..9 (got ${JSON.stringify(opts.rounds)})`);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('--concurrency must be a positive integer');
  if (!Number.isInteger(meta) || meta < 2 || meta > 16) throw new Error('--meta must be an integer 2..16');
  if (!Number.isInteger(buffer) || buffer < 0 || buffer > 512)
    throw new Error('--buffer must be an integer 0..512 (pixels)');
  const tools = selectTools(opts.tools);
  const missing = missingPackages(tools);
  if (missing.length) {
    console.error(
      `bench:seeders: missing Debian packages: ${missing.join(' ')}\n  install them with: sudo apt-get install -y ${missing.join(' ')}\n  (they are not in .ci/run: benchmarks do not run in CI)`,
    );
    process.exitCode = 2;
    return;
  }
  const ts = chooseTileSet(Number(opts.zoom), Number(opts.side));
  const n = tileCount(ts);
  const work = mkdtempSync(path.join(tmpdir(), 'tilebreaker-bench-seeders-'));
  const t0 = performance.now();
  const wms = await startBenchWms(ts);
  const fixtureS = (performance.now() - t0) / 1000;
  const proxy = await startCountingProxy(wms.url, wms.pid);
  const results: Result[] = [];
  let failed = false;
  try {
    console.log(
      `bench:seeders: ${n} tiles (z${ts.z} x ${ts.xMin}..${ts.xMax} y ${ts.yMin}..${ts.yMax}, XYZ rows from the top, 256 px, EPSG:3857), concurrency ${concurrency}, ` +
        `metatiles ${meta}x${meta} with a ${buffer} px buffer in every tool (MapProxy's default meta_buffer is 80, mapcache's 0), one GetMap per tile without buffer`,
    );
    console.log(
      `  WMS: MapServer 8 CGI behind lighttpd on 127.0.0.1, counting proxy in front; fixture ${wms.rasterPx}x${wms.rasterPx} px raster at the tiles' resolution` +
        ` + roads/areas/places${wms.labels ? ' with labels' : ' (no labels: DejaVu font missing)'}, made in ${fixtureS.toFixed(1)} s; ${wms.lighttpdNotes}`,
    );
    for (const line of await calibrate(proxy, wms.layers, ts, concurrency, meta, buffer)) console.log(`  ${line}`);

    // With several rounds the order rotates, so no tool always runs first (after the calibration) or last.
    const runs = Array.from({ length: rounds }, (_, r) =>
      tools.map((_, i) => tools[(i + r) % tools.length]!).map((tool) => ({ tool, round: r + 1 })),
    ).flat();
    for (const { tool, round } of runs) {
      const dir = path.join(work, rounds > 1 ? `${tool}-r${round}` : tool);
      mkdirSync(dir, { recursive: true });
      const metatile = mode(tool) === 'meta' ? { size: meta, buffer } : null;
      await proxy.reset();
      const serverCpu0 = procCpuSeconds(wms.pid, true);
      const proxyCpu0 = procCpuSeconds(proxy.pid, false);
      const busy0 = machineBusySeconds();
      let toolCpu = NaN;
      let seconds = 0;
      let ok = true;
      let note = '';
      let files = new Map<string, string>();
      let root = dir;
      if (family(tool) === 'tilebreaker') {
        root = path.join(dir, 'store');
        const started = performance.now();
        const cpu0 = process.cpuUsage();
        try {
          const r = await seedWithTilebreaker({
            wmsUrl: proxy.url,
            layers: wms.layers,
            version: '1.1.1',
            ...ts,
            concurrency,
            metatile,
            storeRoot: root,
          });
          ok = r.failed === 0;
          note = `reported ${r.tiles} tiles, ${r.failed} failed`;
          for (const [x, y] of tilesOf(ts)) files.set(tileKey(x, y), r.tilePath(ts.z, x, y));
        } catch (err) {
          ok = false;
          note = `threw: ${err instanceof Error ? err.message : String(err)}`;
        }
        seconds = (performance.now() - started) / 1000;
        const cpu = process.cpuUsage(cpu0);
        toolCpu = (cpu.user + cpu.system) / 1e6;
      } else if (family(tool) === 'mapproxy') {
        const cfg = writeMapproxyConfig({
          dir,
          wmsUrl: proxy.url,
          layers: wms.layers,
          levels: [ts.z],
          extent: seedExtent(ts),
          metatile,
        });
        root = cfg.tileRoot;
        const run = await spawnTimed('mapproxy-seed', which('mapproxy-seed')!, mapproxySeedArgs(cfg, concurrency), dir);
        seconds = run.seconds;
        toolCpu = run.cpu;
        ok = run.code === 0;
        note = ok ? '' : `exit ${run.code ?? run.signal}: ${run.tail}`;
      } else {
        const cfg = writeMapcacheConfig({ dir, wmsUrl: proxy.url, layers: wms.layers, metatile });
        root = cfg.tileRoot;
        const m = metatile ? meta : 1;
        const { extent, corrected } = mapcacheExtent(ts, m);
        if ((m & (m - 1)) !== 0) corrected.push('-i scanline (drill-down takes only powers of two)');
        const run = await spawnTimed(
          'mapcache_seed',
          which('mapcache_seed')!,
          mapcacheSeedArgs(cfg.xml, ts, extent, concurrency, m),
          dir,
        );
        seconds = run.seconds;
        toolCpu = run.cpu;
        ok = run.code === 0;
        note = [corrected.length ? corrected.join(', ') : '', ok ? '' : `exit ${run.code ?? run.signal}: ${run.tail}`]
          .filter(Boolean)
          .join('; ');
      }
      const stats = await proxy.stats();
      await new Promise((r) => setTimeout(r, 100)); // lighttpd reaps the last mapserv
      const busy = machineBusySeconds() - busy0;
      const server = procCpuSeconds(wms.pid, true) - serverCpu0;
      const proxyCpu = procCpuSeconds(proxy.pid, false) - proxyCpu0;
      const cpu = { tool: toolCpu, server, proxy: proxyCpu, other: Math.max(0, busy - toolCpu - server - proxyCpu) };
      const disk = scanTiles(root, ts);
      if (family(tool) !== 'tilebreaker') files = disk.inSet;
      else {
        // tilePath is tilebreaker's own answer; the scan must agree with it.
        const missingPaths = files.size ? [...files.entries()].filter(([k, f]) => disk.inSet.get(k) !== f).length : 0;
        if (!files.size) files = disk.inSet;
        if (missingPaths) note += `; ${missingPaths} tilePath()s not found on disk`;
      }
      if (stats.notImage || stats.failed)
        note += `; ${stats.notImage} non-image answers, ${stats.failed} failed requests`;
      if (!ok || disk.inSet.size !== n) failed = true;
      results.push({ tool, round, seconds, ok, note, disk, stats, cpu, files });
      console.log(
        `  ran ${tool}${rounds > 1 ? ` (round ${round})` : ''}: ${seconds.toFixed(1)} s${note ? ` (${note.replace(/^; /, '')})` : ''}`,
      );
    }

    report(results, ts, concurrency, rounds);
    // Pixels are compared on the last round's tiles.
    const equal = await comparePixels(
      results.filter((r) => r.round === rounds),
      ts,
      sample,
      wms.url,
    );
    if (!equal) failed = true;
    // The median over the rounds that seeded the whole set (the only run with one round); with an even count,
    // the mean of the middle two.
    const tps = (t: Tool) =>
      median(
        results
          .filter((x) => x.tool === t && x.ok && x.disk.inSet.size === n)
          .map((r) => r.disk.inSet.size / r.seconds),
      );
    if (rounds > 1) {
      console.log('');
      for (const t of tools)
        console.log(
          `  ${t.padEnd(16)} tiles/s by round: ${results
            .filter((r) => r.tool === t)
            .map((r) => (r.disk.inSet.size / r.seconds).toFixed(1))
            .join(' ')}; median ${tps(t)}`,
        );
    }
    // Over zoom levels, each tool into its own cache format (bench/seeders/seed-levels.ts), round by round.
    const seedTools = SEED_TOOLS.filter((f) => tools.some((t) => family(t) === f));
    const levelRuns: SeedLevelsRun[] = [];
    if (levelsCount > 0) {
      console.log('');
      for (let r = 0; r < rounds; r++) {
        const order = seedTools.map((_, i) => seedTools[(i + r) % seedTools.length]!);
        levelRuns.push(
          ...(await seedLevels({
            proxy,
            layers: wms.layers,
            serverPid: wms.pid,
            ts,
            levels: levelsCount,
            concurrency,
            meta,
            buffer,
            work: path.join(work, `r${r + 1}`),
            tools: order,
            log: (l) => console.log(l),
          })),
        );
      }
      if (levelRuns.some((x) => !x.ok)) failed = true;
    }
    const levelTps = (t: SeedTool) =>
      median(levelRuns.filter((x) => x.tool === t && x.ok).map((x) => x.stored / x.seconds));
    console.log(`seeders: ${FINAL.map((t) => `${t}=${tps(t)}`).join(' ')}`);
    if (levelsCount > 0) console.log(`seed-levels: ${SEED_TOOLS.map((t) => `${t}=${levelTps(t)}`).join(' ')}`);
    if (failed) process.exitCode = 1;
  } finally {
    proxy.stop();
    await wms.stop();
    if (opts.keep) console.log(`  outputs kept in ${work}`);
    else rmSync(work, { recursive: true, force: true });
  }
}

/** The median to one decimal (with an even count, the mean of the middle two), or n/a. */
function median(values: number[]): string {
  const all = [...values].sort((a, b) => a - b);
  if (!all.length) return 'n/a';
  const mid = all.length / 2;
  return (all.length % 2 ? all[Math.floor(mid)]! : (all[mid - 1]! + all[mid]!) / 2).toFixed(1);
}

function report(results: Result[], ts: TileSet, concurrency: number, rounds: number): void {
  const n = tileCount(ts);
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '?');
  const w = rounds > 1 ? 19 : 16;
  console.log('');
  console.log(
    `  ${'tool'.padEnd(w)} ${'seconds'.padStart(7)} ${'tiles/s'.padStart(7)} ${'GetMap'.padStart(6)} ${'other'.padStart(5)} ${'peak'.padStart(4)} ${'MB out'.padStart(6)} ${'WMS s'.padStart(6)} ` +
      `${'procs'.padStart(7)} ${'CPU s: tool'.padStart(11)} ${'mapserv'.padStart(7)} ${'proxy'.padStart(5)} ${'other'.padStart(5)}  on disk: set/${n} + extra  GetMap sizes`,
  );
  for (const r of results) {
    const s = r.stats;
    const window = s.firstStart ? (s.lastEnd - s.firstStart) / 1000 : 0;
    const sizes = Object.entries(s.sizes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} x${v}`)
      .join(', ');
    const disk = `${r.disk.inSet.size} + ${r.disk.extra}${r.disk.extra ? ` (${r.disk.extraExamples.join(' ')} ...)` : ''}`;
    const label = rounds > 1 ? `${r.tool} r${r.round}` : r.tool;
    console.log(
      `  ${label.padEnd(w)} ${f(r.seconds).padStart(7)} ${f(r.disk.inSet.size / r.seconds).padStart(7)} ${String(s.getMap).padStart(6)} ${String(s.other).padStart(5)} ${String(s.peakInFlight).padStart(4)} ` +
        `${f(s.bytesOut / 1e6).padStart(6)} ${f(window).padStart(6)} ${String(s.peakMapserv).padStart(7)} ${f(r.cpu.tool).padStart(11)} ${f(r.cpu.server).padStart(7)} ${f(r.cpu.proxy).padStart(5)} ${f(r.cpu.other).padStart(5)}  ${disk.padEnd(22)}  ${sizes}${r.ok ? '' : '  FAILED'}`,
    );
  }
  console.log(
    `  seconds: wall clock, process spawn to exit for mapproxy-seed/mapcache_seed (Python/C start-up included), the seedWithTilebreaker call for tilebreaker (in this process);`,
  );
  console.log(
    `  tiles/s: tiles of the set on disk / seconds; WMS s: first request to last response at the proxy; peak: most requests in flight at the proxy (each tool was given ${concurrency});`,
  );
  console.log(
    `  procs: most mapserv processes alive at once under lighttpd (sampled every 10 ms; one that has sent its answer may still be exiting as the next starts);`,
  );
  console.log(
    `  MB out: bytes MapServer sent; CPU s: user+system of the tool (all processes/threads), of lighttpd + every mapserv, of the proxy, and of everything else on the machine (${cpus().length} cores in all)`,
  );
  for (const r of results.filter((x) => x.round === 1)) {
    if (r.stats.samples[0]) console.log(`  first GetMap of ${r.tool}: ${r.stats.samples[0]}`);
  }
}

/** Decodes a sample of tiles from tilebreaker and each other tool of the same mode and compares the pixels. */
async function comparePixels(results: Result[], ts: TileSet, sample: number, wmsUrl: string): Promise<boolean> {
  const rnd = prng(7);
  const all = [...tilesOf(ts)];
  const picks: [number, number][] = [];
  const count = sample > 0 ? Math.min(sample, all.length) : all.length;
  while (picks.length < count) {
    const t = all.splice(Math.floor(rnd() * all.length), 1)[0]!;
    picks.push(t);
  }
  console.log('');
  console.log(
    `  pixels: ${picks.length} random tiles of the set decoded (sharp, RGBA 8-bit) and compared; max abs channel difference, pixels that differ`,
  );
  let equal = true;
  const kinds = new Map<Tool, Set<string>>();
  const compare = async (a: Result, b: Result, informational: boolean) => {
    let maxAbs = 0;
    let differing = 0;
    let tiles = 0;
    let missing = 0;
    let notPng = 0;
    const differ: [number, number][] = [];
    for (const [x, y] of picks) {
      const fa = a.files.get(tileKey(x, y));
      const fb = b.files.get(tileKey(x, y));
      let da: Decoded, db: Decoded;
      try {
        if (!fa || !fb) throw new Error('missing');
        [da, db] = await Promise.all([decode(fa), decode(fb)]);
      } catch {
        missing++;
        continue;
      }
      for (const [r, d] of [
        [a, da],
        [b, db],
      ] as const) {
        if (!kinds.has(r.tool)) kinds.set(r.tool, new Set());
        kinds.get(r.tool)!.add(`${d.png ? 'PNG' : 'NOT PNG'} ${d.kind}`);
        if (!d.png) notPng++;
      }
      const d = diff(da, db);
      tiles++;
      if (d.differing) {
        differing++;
        differ.push([x, y]);
      }
      maxAbs = Math.max(maxAbs, d.maxAbs);
    }
    const same = missing === 0 && notPng === 0 && maxAbs === 0;
    const head = `  ${`${a.tool} vs ${b.tool}`.padEnd(36)} ${tiles} compared${missing ? `, ${missing} missing/undecodable` : ''}: max abs diff ${maxAbs}, ${differing} tiles differ`;
    if (informational || same) {
      console.log(
        head + (informational ? '  (different requests: labels and line ends placed per request)' : '  equal'),
      );
      return;
    }
    // Why: for each differing tile (up to 32), each tool's own GetMap sent again straight to lighttpd, and the
    // first tool's GetMap with only the second's BBOX string in it.
    const checked = differ.slice(0, 32);
    const lines: string[] = [];
    let digits = 0; // same GetMap but for the digits of BBOX, and those digits alone make the difference
    let requests = 0; // the tools asked for different GetMaps (metatile extent or size) covering the tile
    let bboxApart = 0;
    for (const [x, y] of checked) {
      const at = await attribute(
        wmsUrl,
        ts.z,
        x,
        y,
        { queries: a.stats.queries, file: a.files.get(tileKey(x, y))! },
        { queries: b.stats.queries, file: b.files.get(tileKey(x, y))! },
      );
      if (!at) {
        lines.push(`    ${ts.z}/${x}/${y}: no covering GetMap found for one of the two`);
        continue;
      }
      const isDigits = at.reproduced && at.serverDiffers && at.bboxDecides && at.sameGeometry;
      const isRequests = at.reproduced && !at.sameGeometry;
      if (isDigits) {
        digits++;
        bboxApart = Math.max(bboxApart, at.bboxDiffM);
      }
      if (isRequests) requests++;
      if (lines.length < 2 || !(isDigits || isRequests))
        lines.push(
          `    ${at.tile}: each tool's own GetMap sent again ${at.reproduced ? 'gives exactly its stored tile' : 'does NOT give its stored tile (a tool changed the pixels)'}; ` +
            `the server ${at.serverDiffers ? 'draws the two GetMaps differently' : 'draws both GetMaps the same'}` +
            `${at.serverDiffers ? `; ${a.tool}'s GetMap with only ${b.tool}'s BBOX string in it ${at.bboxDecides ? 'draws exactly the latter' : 'still differs'}` : ''}; they differ in: ${at.params || 'nothing'}`,
        );
    }
    const explained = digits + requests;
    const ok = missing === 0 && notPng === 0 && differ.length <= checked.length && explained === checked.length;
    if (!ok) equal = false;
    const why: string[] = [];
    const tiles_ = (k: number) => `${k} tile${k === 1 ? '' : 's'}`;
    if (digits)
      why.push(
        `${tiles_(digits)}: MapServer draws the two tools' BBOX strings (at most ${bboxApart.toExponential(1)} m apart) differently`,
      );
    if (requests)
      why.push(
        `${tiles_(requests)}: the tools asked for GetMaps of a different extent or size (metatiles cut differently)`,
      );
    console.log(
      head +
        (ok
          ? `  each tool has exactly the pixels MapServer draws for its own GetMap; ${why.join('; ')}`
          : `  NOT EQUAL (${explained} of ${checked.length} differing tiles explained${why.length ? `: ${why.join('; ')}` : ''})`),
    );
    for (const l of lines) console.log(l);
  };
  for (const m of ['meta', '1x1'] as const) {
    const inMode = results.filter((r) => mode(r.tool) === m);
    const ref = inMode.find((r) => family(r.tool) === 'tilebreaker') ?? inMode[0];
    if (!ref) continue;
    for (const other of inMode) if (other !== ref) await compare(ref, other, false);
  }
  const tm = results.find((r) => r.tool === 'tilebreaker-meta');
  const t1 = results.find((r) => r.tool === 'tilebreaker-1x1');
  if (tm && t1) await compare(tm, t1, true);
  for (const [tool, k] of kinds) console.log(`  stored as: ${tool.padEnd(16)} ${[...k].join('; ')}`);
  return equal;
}

// The seeding tools it runs end with it.
endOnSignals(() => Promise.resolve());
new Command('bench:seeders')
  .description(
    'tilebreaker vs mapproxy-seed vs mapcache_seed on one tile set from MapServer, metatiles and one tile per request, same concurrency, one run',
  )
  .option(
    '--concurrency <n>',
    'requests in flight for every tool (tilebreaker concurrency, mapproxy-seed -c, mapcache_seed -n)',
    '4',
  )
  .option('--zoom <z>', 'zoom of the tile set', '14')
  .option('--side <n>', 'tiles per side of the square tile set (aligned to it)', '32')
  .option('--meta <n>', 'metatile size in tiles (n x n) for the *-meta runs', '4')
  .option(
    '--buffer <px>',
    "metatile buffer in pixels, the same in every tool (80: MapProxy's default; mapcache's is 0)",
    '80',
  )
  .option(
    '--tools <list>',
    `comma list: ${TOOLS.join(', ')}, or tilebreaker, mapproxy, mapcache, meta, 1x1, all`,
    'all',
  )
  .option('--sample <n>', 'tiles compared pixel by pixel (0: all)', '16')
  .option('--rounds <n>', 'run every tool this many times, in a rotating order; the last line gives medians', '1')
  .option(
    '--seed-levels <n>',
    'then seed the same area over this many levels (the zoom and those above it), each tool into its own cache; 0: skip',
    '3',
  )
  .option('--keep', 'keep the tiles, configs and logs (the directory is printed)')
  .action((opts: Opts) => main(opts))
  .parseAsync()
  .catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
