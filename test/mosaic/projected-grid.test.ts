import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import sharp from 'sharp';
import { writeSidecars } from '../../src/activities/mosaic/georef';
import { planMosaic } from '../../src/activities/mosaic/plan';
import { createWorker } from '../../src/client/worker';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import type { MosaicRequest, MosaicResult } from '../../src/messages/mosaic-types';
import { getMapUrl, tileUrl } from '../../src/sources/request-url';
import { parseSource, type SourceConfig } from '../../src/sources/schema';
import { startWms, wmsAvailable, type Wms } from '../helpers/mapserver';
import { gdalinfo, readManifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

// A source on a national grid (Swiss LV95, EPSG:2056): MapServer serves a layer in EPSG:2056 through WMS, the
// mosaic asks for GetMaps per tile in that CRS, and its COG is georeferenced in it, with no sidecar.

const skip = wmsAvailable() ? false : 'cgi-mapserver, lighttpd or gdal-bin is not installed';
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-lv95-'));
// The fixture raster: 512 px of 10 m, on the grid's pixels (so nearest-neighbour rendering has no ties).
const EXTENT: [number, number, number, number] = [2_600_000, 1_200_000, 2_605_120, 1_205_120];
const GRID = {
  crs: 'EPSG:2056',
  origin: [2_420_000, 1_350_000],
  resolutions: [160, 80, 40, 20, 10, 5],
  extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
};
const LEVEL_10M = 4;
const SPAN = 2_560; // one 256 px tile at 10 m
const taskQueue = uniqueTaskQueue('lv95');
let wms: Wms;
let env: TestWorkflowEnvironment;
let temporal: Promise<void> | undefined;
let worker: Worker;
let running: Promise<void>;
let sources: string;

const mosaic = (extra: Partial<MosaicRequest>, id: string): Promise<MosaicResult> =>
  env.client.workflow.execute('mosaicWorkflow', {
    taskQueue,
    workflowId: `lv95-${id}-${process.pid}`,
    args: [
      {
        sourcesFile: sources,
        sourceName: 'lv95',
        bbox: [2_600_500, 1_200_500, 2_604_500, 1_204_500],
        crs: 'EPSG:2056',
        zoom: LEVEL_10M,
        output: path.join(dir, `${id}.tif`),
        sidecars: false,
        ...extra,
      },
    ],
  });

/** One dev server and worker for every MapServer mosaic of this file, started by the first suite that needs it. */
const startTemporal = (): Promise<void> =>
  (temporal ??= (async () => {
    env = await devServerEnv(ALL_SEARCH_ATTRIBUTES);
    worker = await createWorker({
      connection: env.nativeConnection,
      client: env.client,
      namespace: 'default',
      taskQueue,
      roots: TEST_ROOTS,
    });
    running = worker.run();
  })());
after(async () => {
  if (!temporal) return;
  await temporal;
  worker.shutdown();
  await running;
  await env.teardown();
});

describe('a source on a national grid (EPSG:2056) from MapServer', { skip }, () => {
  before(async () => {
    wms = await startWms({ epsg: 2056, extent: EXTENT });
    await startTemporal();
    sources = path.join(dir, 'sources.yaml');
    const source = {
      type: 'wms',
      url: wms.url,
      version: '1.3.0',
      layers: ['quadrants'],
      transparent: false,
      grid: GRID,
      metatile: { size: [2, 2], buffer: 16 },
      concurrency: 4,
    };
    writeFileSync(sources, JSON.stringify({ sources: { lv95: source } }));
  });
  after(async () => {
    await wms?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a bbox in EPSG:2056: GetMaps per (meta)tile in EPSG:2056, every tile served, the COG alone georeferenced in EPSG:2056 and equal to one GetMap of its bounds', async () => {
    const result = await mosaic({}, 'lv95');
    const manifest = readManifest(result) as ReturnType<typeof readManifest> & {
      crs: string;
      bounds: { minX: number; minY: number; maxX: number; maxY: number };
      grid: { xMin: number; xMax: number; yMin: number; yMax: number };
    };
    assert.equal(manifest.counts.ok, 9, JSON.stringify(manifest.counts));
    assert.equal(manifest.crs, 'EPSG:2056');
    // Columns 70-72 and rows 56-58 of the 10 m level: the tiles the bbox touches, counted from the origin.
    assert.deepEqual(
      [manifest.grid.xMin, manifest.grid.xMax, manifest.grid.yMin, manifest.grid.yMax],
      [70, 72, 56, 58],
    );
    const b = manifest.bounds;
    assert.deepEqual(
      [b.minX, b.minY, b.maxX, b.maxY],
      [2_420_000 + 70 * SPAN, 1_350_000 - 59 * SPAN, 2_420_000 + 73 * SPAN, 1_350_000 - 56 * SPAN],
    );

    // The TIFF alone (no sidecar was written): its own GeoTIFF keys name EPSG:2056 and the grid.
    const tif = path.join(dir, 'lv95.tif');
    for (const f of ['lv95.tif.aux.xml', 'lv95.tfw', 'lv95.prj']) assert.equal(existsSync(path.join(dir, f)), false, f);
    const info = gdalinfo(tif);
    assert.match(info.coordinateSystem.wkt, /ID\["EPSG",2056\]\]$/);
    const want = [b.minX, 10, 0, b.maxY, 0, -10];
    info.geoTransform.forEach((v, i) =>
      assert.ok(Math.abs(v - want[i]!) <= 1e-6, `geoTransform[${i}] ${v} vs ${want[i]}`),
    );
    const validator = spawnSync(
      '/usr/bin/python3',
      ['-m', 'osgeo_utils.samples.validate_cloud_optimized_geotiff', '--full-check=yes', tif],
      { encoding: 'utf8' },
    );
    assert.match(validator.stdout, /is a valid cloud optimized GeoTIFF/, `${validator.stdout}${validator.stderr}`);

    // Pixel for pixel, what MapServer draws for the mosaic's bounds in one GetMap: every tile in its place.
    const source = parseSource({
      type: 'wms',
      url: wms.url,
      version: '1.3.0',
      layers: ['quadrants'],
      transparent: false,
      grid: GRID,
    }) as Extract<SourceConfig, { type: 'wms' }>;
    const url = getMapUrl(source, b, 768, 768);
    assert.match(url, /CRS=EPSG%3A2056/);
    const whole = Buffer.from(await (await fetch(url)).arrayBuffer());
    const expected = await sharp(whole).removeAlpha().raw().toBuffer();
    const got = await sharp(tif).removeAlpha().raw().toBuffer();
    assert.equal(got.length, expected.length);
    let differ = 0;
    for (let i = 0; i < got.length; i++) if (got[i] !== expected[i]) differ++;
    assert.equal(differ, 0, `${differ} channel values differ from the single GetMap`);
    // And the raster is there: the fixture's north-east quadrant is red.
    const ne = (256 + 150) * 768 * 3 + (768 - 256 - 150) * 3;
    assert.ok(got[ne]! > 200 && got[ne + 1]! < 100, `north-east pixel ${got[ne]},${got[ne + 1]},${got[ne + 2]}`);
  });

  test('a grid whose levels have corners of their own (a WMTS set with a TopLeftCorner per matrix): the tiles of each level in its place', async () => {
    // Level 4's corner moved half a tile west and north (to 2418720, 1351280): its tiles straddle the others' edges.
    const origins = GRID.resolutions.map((_, z) =>
      z === LEVEL_10M ? [2_420_000 - SPAN / 2, 1_350_000 + SPAN / 2] : GRID.origin,
    );
    const shifted = { ...GRID, origin: origins[0], origins };
    const file = path.join(dir, 'shifted.yaml');
    writeFileSync(
      file,
      JSON.stringify({
        sources: {
          lv95: {
            type: 'wms',
            url: wms.url,
            version: '1.3.0',
            layers: ['quadrants'],
            transparent: false,
            grid: shifted,
            metatile: { size: [2, 2], buffer: 16 },
            concurrency: 4,
          },
        },
      }),
    );
    const result = await mosaic({ sourcesFile: file }, 'lv95-shifted');
    const manifest = readManifest(result) as ReturnType<typeof readManifest> & {
      bounds: { minX: number; minY: number; maxX: number; maxY: number };
      grid: { xMin: number; xMax: number; yMin: number; yMax: number };
    };
    assert.equal(manifest.counts.ok, manifest.total);
    // From that corner, 2600500 lies in column 71 (2600480..2603040) and 2604500 in 72; 1204500 in row 57, 1200500 in 58.
    assert.deepEqual(
      [manifest.grid.xMin, manifest.grid.xMax, manifest.grid.yMin, manifest.grid.yMax],
      [71, 72, 57, 58],
    );
    const b = manifest.bounds;
    assert.deepEqual(
      [b.minX, b.minY, b.maxX, b.maxY],
      [2_418_720 + 71 * SPAN, 1_351_280 - 59 * SPAN, 2_418_720 + 73 * SPAN, 1_351_280 - 57 * SPAN],
    );
    const source = parseSource({
      type: 'wms',
      url: wms.url,
      version: '1.3.0',
      layers: ['quadrants'],
      transparent: false,
      grid: GRID,
    }) as Extract<SourceConfig, { type: 'wms' }>;
    const whole = await sharp(Buffer.from(await (await fetch(getMapUrl(source, b, 512, 512))).arrayBuffer()))
      .removeAlpha()
      .raw()
      .toBuffer();
    const got = await sharp(path.join(dir, 'lv95-shifted.tif')).removeAlpha().raw().toBuffer();
    assert.equal(got.length, whole.length);
    let differ = 0;
    for (let i = 0; i < got.length; i++) if (got[i] !== whole[i]) differ++;
    assert.equal(differ, 0, `${differ} channel values differ from the single GetMap`);
  });

  test('a bbox in degrees is reprojected into the grid (proj4js): the tiles that cover it in EPSG:2056', async () => {
    // About 2 km square in the middle of the fixture, as longitude and latitude: LV95 (2601900, 1201700) and
    // (2604100, 1203900) as GDAL's gdaltransform puts them, so the test does not take proj4js's word for it.
    const [w, s] = [7.4635978888669, 46.9663720291791];
    const [e, n] = [7.49252510015212, 46.9861516034573];
    const result = await mosaic({ bbox: [w, s, e, n], crs: 'EPSG:4326', sidecars: true }, 'lv95-degrees');
    const manifest = readManifest(result) as ReturnType<typeof readManifest> & {
      crs: string;
      grid: { xMin: number; xMax: number; yMin: number; yMax: number };
    };
    assert.equal(manifest.crs, 'EPSG:2056');
    assert.equal(manifest.counts.ok, manifest.total);
    // 2601900..2604100 lies in column 71 (2601760..2604320), 1201700..1203900 in row 57 (1201520..1204080).
    assert.deepEqual(
      [manifest.grid.xMin, manifest.grid.xMax, manifest.grid.yMin, manifest.grid.yMax],
      [71, 71, 57, 57],
    );
    // With sidecars, the .prj and the .aux.xml carry LV95's WKT.
    const prj = path.join(dir, 'lv95-degrees.prj');
    assert.match(spawnSync('cat', [prj], { encoding: 'utf8' }).stdout, /^PROJCS\["CH1903\+ \/ LV95"/);
  });
});

describe('a grid whose CRS puts northing first (LAEA Europe, EPSG:3035), from MapServer', { skip }, () => {
  let laea: Wms;
  const laeaDir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-laea-'));
  before(async () => {
    laea = await startWms({ epsg: 3035, extent: [4_000_000, 2_600_000, 4_005_120, 2_605_120] });
  });
  after(async () => {
    await laea?.stop();
    rmSync(laeaDir, { recursive: true, force: true });
  });

  test('WMS 1.3.0 writes BBOX northing first, 1.1.1 easting first: both draw the same tile, in its place', async () => {
    const grid = {
      crs: 'EPSG:3035',
      origin: [3_990_000, 2_620_000],
      resolutions: [20, 10],
      extent: [3_990_000, 2_590_000, 4_020_000, 2_620_000],
    };
    const tile = { z: 1, x: 5, y: 6 }; // x 4002800..4005360, y 2602080..2604640: the fixture's north-east quadrant, mostly
    const pixels = async (version: '1.1.1' | '1.3.0') => {
      const url = tileUrl(
        parseSource({ type: 'wms', url: laea.url, version, layers: ['quadrants'], transparent: false, grid }),
        tile,
      );
      const bbox = new URL(url).searchParams.get('BBOX');
      assert.equal(bbox, version === '1.3.0' ? '2602080,4002800,2604640,4005360' : '4002800,2602080,4005360,2604640');
      const res = await fetch(url);
      assert.equal(res.headers.get('content-type'), 'image/png');
      return sharp(Buffer.from(await res.arrayBuffer()))
        .removeAlpha()
        .raw()
        .toBuffer();
    };
    const [a, b] = [await pixels('1.1.1'), await pixels('1.3.0')];
    // The sidecars name LAEA Europe without swapping its axes: GDAL puts the tile near 5.9 E, 46.5 N (317 km west
    // and 606 km south of LAEA's centre at 10 E, 52 N), not in the Atlantic where swapped axes would.
    const png = path.join(laeaDir, 'laea.png');
    await sharp(a, { raw: { width: 256, height: 256, channels: 3 } })
      .png()
      .toFile(png);
    await writeSidecars(
      png,
      { minX: 4_002_800, minY: 2_602_080, maxX: 4_005_360, maxY: 2_604_640, crs: 'EPSG:3035' },
      256,
      256,
    );
    const wgs84 = (
      JSON.parse(spawnSync('gdalinfo', ['-json', png], { encoding: 'utf8' }).stdout) as {
        wgs84Extent: { coordinates: number[][][] };
      }
    ).wgs84Extent.coordinates[0]!;
    const [lon, lat] = [
      wgs84.reduce((t, p) => t + p[0]!, 0) / wgs84.length,
      wgs84.reduce((t, p) => t + p[1]!, 0) / wgs84.length,
    ];
    assert.ok(Math.abs(lon - 5.87) < 0.05 && Math.abs(lat - 46.47) < 0.05, `the tile's centre at ${lon}, ${lat}`);
    assert.ok(a.equals(b), 'the two versions draw the same pixels');
    // Row 100, column 100 of the tile lies in the north-east quadrant: red.
    const i = (100 * 256 + 100) * 3;
    assert.ok(a[i]! > 200 && a[i + 1]! < 100 && a[i + 2]! < 100, `north-east pixel ${a[i]},${a[i + 1]},${a[i + 2]}`);
  });
});

describe('a geographic grid (EPSG:4326, as a WMTS matrix set in degrees) from MapServer', { skip }, () => {
  // The matrix set MapProxy publishes for a 4326 grid with its origin at the north-west corner (the fixture
  // test/fixtures/capabilities/mapproxy-wmts-wgs84-rest.xml), as `sources import` reads it.
  const RES = [
    0.703125, 0.3515625, 0.17578125, 0.087890625, 0.0439453125, 0.02197265625, 0.010986328125, 0.0054931640625,
  ];
  const grid = { crs: 'EPSG:4326', origin: [-180, 90], resolutions: RES, extent: [-180, -90, 180, 90] };
  const px = RES[7]!;
  // The raster: 512 px of the level-7 resolution, on the grid's pixels (34048 columns and 7680 rows from the origin).
  const extent: [number, number, number, number] = [
    -180 + 34_048 * px,
    90 - 7_680 * px - 512 * px,
    -180 + 34_048 * px + 512 * px,
    90 - 7_680 * px,
  ];
  const geoDir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-wgs84-'));
  let geo: Wms;
  before(async () => {
    geo = await startWms({ epsg: 4326, extent });
    await startTemporal();
  });
  after(async () => {
    await geo?.stop();
    rmSync(geoDir, { recursive: true, force: true });
  });

  test('a bbox in degrees on the grid: GetMaps in EPSG:4326 (latitude first in 1.3.0), the COG alone in EPSG:4326 with longitude first, equal to one GetMap', async () => {
    const source = {
      type: 'wms',
      url: geo.url,
      version: '1.3.0',
      layers: ['quadrants'],
      transparent: false,
      grid,
      metatile: { size: [2, 2], buffer: 16 },
      concurrency: 4,
    } as const;
    const output = path.join(geoDir, 'wgs84.tif');
    const result = await env.client.workflow.execute<(r: MosaicRequest) => Promise<MosaicResult>>('mosaicWorkflow', {
      taskQueue,
      workflowId: `wgs84-${process.pid}`,
      args: [
        {
          source: source as unknown as NonNullable<MosaicRequest['source']>,
          sourceName: 'wgs84',
          bbox: [extent[0] - 0.5, extent[1] - 0.5, extent[2] - 0.2, extent[3] - 0.2],
          zoom: 7,
          output,
          sidecars: false,
        },
      ],
    });
    const manifest = readManifest(result) as ReturnType<typeof readManifest> & {
      crs: string;
      bounds: { minX: number; minY: number; maxX: number; maxY: number };
    };
    assert.equal(manifest.crs, 'EPSG:4326');
    assert.equal(manifest.counts.ok, 9, JSON.stringify(manifest.counts));
    const b = manifest.bounds;
    // Columns 132-134 and rows 30-32 of level 7 (1.40625 degrees a tile): the raster's own 2 x 2 tiles (133-134,
    // 30-31) and the column west and the row south its bbox reaches.
    assert.deepEqual(
      [b.minX, b.minY, b.maxX, b.maxY],
      [-180 + 132 * 256 * px, 90 - 33 * 256 * px, -180 + 135 * 256 * px, 90 - 30 * 256 * px],
    );

    const info = JSON.parse(spawnSync('gdalinfo', ['-json', output], { encoding: 'utf8' }).stdout) as {
      coordinateSystem: { wkt: string };
      geoTransform: number[];
      wgs84Extent: { coordinates: number[][][] };
    };
    assert.match(info.coordinateSystem.wkt, /^GEOGCRS\["WGS 84"[\s\S]*ID\["EPSG",4326\]\]$/);
    const want = [b.minX, px, 0, b.maxY, 0, -px];
    info.geoTransform.forEach((v, i) =>
      assert.ok(Math.abs(v - want[i]!) <= 1e-9, `geoTransform[${i}] ${v} vs ${want[i]}`),
    );
    // Longitude first where GDAL puts the image: over the Alps, not swapped into the Indian Ocean.
    const corners = info.wgs84Extent.coordinates[0]!;
    assert.ok(
      corners.every(
        ([lon, lat]) =>
          lon! >= b.minX - 1e-9 && lon! <= b.maxX + 1e-9 && lat! >= b.minY - 1e-9 && lat! <= b.maxY + 1e-9,
      ),
      JSON.stringify(corners),
    );
    const validator = spawnSync(
      '/usr/bin/python3',
      ['-m', 'osgeo_utils.samples.validate_cloud_optimized_geotiff', '--full-check=yes', output],
      { encoding: 'utf8' },
    );
    assert.match(validator.stdout, /is a valid cloud optimized GeoTIFF/, `${validator.stdout}${validator.stderr}`);

    // One GetMap of the mosaic's bounds, pixel for pixel; its BBOX is latitude first, as 1.3.0 wants for EPSG:4326.
    const url = getMapUrl(
      parseSource({ ...source, metatile: undefined }) as Extract<SourceConfig, { type: 'wms' }>,
      b,
      768,
      768,
    );
    assert.equal(new URL(url).searchParams.get('BBOX'), [b.minY, b.minX, b.maxY, b.maxX].join(','));
    const whole = await sharp(Buffer.from(await (await fetch(url)).arrayBuffer()))
      .removeAlpha()
      .raw()
      .toBuffer();
    const got = await sharp(output).removeAlpha().raw().toBuffer();
    assert.equal(got.length, whole.length);
    let differ = 0;
    for (let i = 0; i < got.length; i++) if (got[i] !== whole[i]) differ++;
    assert.equal(differ, 0, `${differ} channel values differ from the single GetMap`);
    // The fixture's north-east quadrant (the mosaic's top right) is red: the raster is there, the right way up.
    const ne = (100 * 768 + 700) * 3;
    assert.ok(got[ne]! > 200 && got[ne + 1]! < 100, `north-east pixel ${got[ne]},${got[ne + 1]},${got[ne + 2]}`);
    // And WMS 1.1.1 (longitude first) draws the same tile as 1.3.0.
    const tile = { z: 7, x: 134, y: 30 };
    const [v111, v130] = await Promise.all(
      (['1.1.1', '1.3.0'] as const).map(async (version) => {
        const u = tileUrl(
          parseSource({ type: 'wms', url: geo.url, version, layers: ['quadrants'], transparent: false, grid }),
          tile,
        );
        return sharp(Buffer.from(await (await fetch(u)).arrayBuffer()))
          .removeAlpha()
          .raw()
          .toBuffer();
      }),
    );
    assert.ok(v111!.equals(v130!), 'the two versions draw the same pixels');
  });
});

describe('a source grid: what the planner refuses, naming the field and the value', () => {
  const grid = {
    crs: 'EPSG:2056',
    origin: [2_420_000, 1_350_000],
    resolutions: [40, 20, 10],
    extent: [2_420_000, 1_030_000, 2_900_000, 1_350_000],
  };
  const source = { type: 'wms', url: 'http://127.0.0.1:9/wms', layers: ['a'], grid } as const;
  const req = (extra: Partial<MosaicRequest>): MosaicRequest => ({
    source: source as unknown as NonNullable<MosaicRequest['source']>,
    bbox: [2_600_000, 1_200_000, 2_601_000, 1_201_000],
    crs: 'EPSG:2056',
    zoom: 2,
    output: '/tmp/lv95.tif',
    ...extra,
  });

  test('bbox CRS, level, grid fields', async () => {
    const plan = await planMosaic(req({}));
    assert.equal(plan.bounds.crs, 'EPSG:2056');
    await assert.rejects(
      planMosaic(req({ crs: 'EPSG:3857' })),
      /crs: the source's grid is in EPSG:2056; give the bbox in EPSG:2056 or in EPSG:4326 \(got "EPSG:3857"\)/,
    );
    await assert.rejects(
      planMosaic(req({ zoom: 3 })),
      /zoom: the source's grid \(EPSG:2056\) has levels 0\.\.2 \(got 3\)/,
    );
    await assert.rejects(
      planMosaic(
        req({
          source: { ...source, grid: { ...grid, resolutions: [10, 20] } } as unknown as NonNullable<
            MosaicRequest['source']
          >,
        }),
      ),
      /grid\.resolutions\.1: must be smaller than the level before \(10\), got 20/,
    );
    await assert.rejects(
      planMosaic(
        req({
          source: { ...source, grid: { ...grid, crs: 'EPSG:3857' } } as unknown as NonNullable<MosaicRequest['source']>,
        }),
      ),
      /grid\.crs: is the default grid/,
    );
    // A code tilebreaker has no definition for: a bbox in its own CRS works, one in degrees needs grid.proj4.
    const sweref = { ...source, grid: { ...grid, crs: 'EPSG:3006' } } as unknown as NonNullable<
      MosaicRequest['source']
    >;
    assert.equal((await planMosaic(req({ source: sweref, crs: 'EPSG:3006' }))).bounds.crs, 'EPSG:3006');
    await assert.rejects(
      planMosaic(req({ source: sweref, crs: 'EPSG:4326', bbox: [7.4, 46.9, 7.5, 47] })),
      /crs: a bbox in EPSG:4326 needs EPSG:3006's definition: give the source's grid a proj4 string/,
    );
    // A box outside the grid is refused, not clamped to the edge's tiles (LV03 coordinates given as LV95).
    await assert.rejects(
      planMosaic(req({ bbox: [600_000, 200_000, 601_000, 201_000] })),
      /bbox: \[600000,200000,601000,201000\] \(EPSG:2056\) lies outside the source grid's extent/,
    );
    await assert.rejects(
      planMosaic(req({ crs: 'EPSG:4326', bbox: [2.2, 48.8, 2.4, 48.9] })),
      /lies outside the source grid's extent .*; in EPSG:2056 it is \[/,
    );
    // Not a projected CRS: a geographic code, or a code written with a leading zero.
    for (const crs of ['EPSG:4258', 'EPSG:03857']) {
      await assert.rejects(
        planMosaic(
          req({ source: { ...source, grid: { ...grid, crs } } as unknown as NonNullable<MosaicRequest['source']> }),
        ),
        /grid\.crs: /,
      );
    }
    // Near the pole: beyond Web Mercator's reach, within a grid in degrees.
    const polar = {
      bbox: [0, 86, 10, 89] as [number, number, number, number],
      crs: 'EPSG:4326',
      zoom: 3,
      output: '/tmp/polar.tif',
    };
    await assert.rejects(
      planMosaic({ source: { type: 'xyz', url: 'http://127.0.0.1:9/{z}/{x}/{y}.png' }, ...polar }),
      /bbox: lies beyond web mercator's latitude limit ±85\.0511/,
    );
    const wgs84 = {
      type: 'wms',
      url: 'http://127.0.0.1:9/wms',
      layers: ['a'],
      grid: {
        crs: 'EPSG:4326',
        origin: [-180, 90],
        resolutions: [0.703125, 0.3515625, 0.17578125, 0.087890625],
        extent: [-180, -90, 180, 90],
      },
    };
    const northmost = await planMosaic({ source: wgs84 as unknown as NonNullable<MosaicRequest['source']>, ...polar });
    assert.deepEqual([northmost.bounds.maxY, northmost.grid.yMin], [90, 0]);
    // A Web Mercator source takes no other CRS.
    await assert.rejects(
      planMosaic({
        source: { type: 'xyz', url: 'http://127.0.0.1:9/{z}/{x}/{y}.png' },
        bbox: [2_600_000, 1_200_000, 2_601_000, 1_201_000],
        crs: 'EPSG:2056',
        zoom: 2,
        output: '/tmp/x.tif',
      }),
      /crs: the source is on the Web Mercator grid; give the bbox in EPSG:4326 or EPSG:3857, or the source a grid in EPSG:2056/,
    );
  });
});
