import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readlinkSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import {
  EPSG_3857_WKT,
  geoTransform,
  worldFile,
  writeSidecars,
  type Bounds3857,
} from '../../src/activities/mosaic/georef';
import { stitchMosaic, StitchInputError, writeCoverageMask } from '../../src/activities/mosaic/stitch';
import { tileBounds } from '../../src/geo/mercator';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stitch-test-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const hasGdal = spawnSync('gdalinfo', ['--version']).error === undefined;

/** The EPSG:3857 bounds of an XYZ block of tiles (as the planner computes them). */
function gridBounds(z: number, x0: number, y0: number, cols: number, rows: number): Bounds3857 {
  const tl = tileBounds(z, x0, y0);
  const br = tileBounds(z, x0 + cols - 1, y0 + rows - 1);
  return { minX: tl.minX, maxY: tl.maxY, maxX: br.maxX, minY: br.minY };
}

type Rgba = [number, number, number, number];

/** A uniform tile with a white top-left pixel (shows any offset or flip). */
async function markedTile(path: string, size: number, [r, g, b]: [number, number, number]): Promise<string> {
  const raw = Buffer.alloc(size * size * 3);
  for (let i = 0; i < size * size; i++) raw.set([r, g, b], i * 3);
  raw.set([255, 255, 255], 0);
  await sharp(raw, { raw: { width: size, height: size, channels: 3 } })
    .png()
    .toFile(path);
  return path;
}

function pixelAt(data: Buffer, width: number, channels: number, x: number, y: number): number[] {
  const i = (y * width + x) * channels;
  return [...data.subarray(i, i + channels)];
}

interface GdalInfo {
  size: [number, number];
  files?: string[];
  geoTransform?: number[];
  coordinateSystem?: { wkt: string };
  stac?: { 'proj:epsg'?: number | null };
  metadata?: Record<string, Record<string, string>>;
  bands: {
    type: string;
    block: [number, number];
    colorInterpretation: string;
    overviews?: { size: [number, number] }[];
  }[];
}

function gdalinfo(path: string): GdalInfo {
  const run = spawnSync('gdalinfo', ['-json', path], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as GdalInfo;
}

function assertGeoref(info: GdalInfo, expected: number[], what: string): void {
  assert.ok(info.geoTransform, `${what}: no geotransform`);
  info.geoTransform.forEach((v, i) =>
    assert.ok(Math.abs(v - expected[i]!) <= 1e-6, `${what}: geoTransform[${i}] ${v} != ${expected[i]}`),
  );
  assert.equal(info.stac?.['proj:epsg'], 3857, `${what}: proj:epsg`);
  assert.match(info.coordinateSystem?.wkt ?? '', /Pseudo-Mercator/);
  assert.match(info.coordinateSystem?.wkt ?? '', /ID\["EPSG",3857\]\]$/);
}

test('geoTransform, worldFile and the sidecars describe the same grid', async () => {
  const bounds = { minX: -1000, minY: 2000, maxX: 3000, maxY: 4000 };
  assert.deepEqual(geoTransform(bounds, 400, 100), [-1000, 10, 0, 4000, 0, -20]);
  // Pixel size, rotations, then the centre of the top-left pixel (half a pixel in from the corner).
  assert.deepEqual(worldFile(bounds, 400, 100).split('\n'), [
    '10.0000000000',
    '0.0000000000',
    '0.0000000000',
    '-20.0000000000',
    '-995.0000000000',
    '3990.0000000000',
    '',
  ]);
  // Real values keep every digit they need to read back exactly, in fixed notation.
  const real = gridBounds(22, 1_000_000, 1_500_000, 3, 2);
  const lines = worldFile(real, 768, 512).trim().split('\n');
  assert.equal(lines.length, 6);
  const gt = geoTransform(real, 768, 512);
  const back = lines.map(Number);
  assert.deepEqual(back, [gt[1], 0, 0, gt[5], gt[0] + gt[1] / 2, gt[3] + gt[5] / 2]);
  for (const l of lines) assert.match(l, /^-?\d+\.\d{10,}$/);
  assert.throws(() => geoTransform(bounds, 0, 10), RangeError);
  assert.throws(() => geoTransform({ ...bounds, maxX: -2000 }, 10, 10), RangeError);

  const paths = await Promise.all(
    ['a.tif', 'b.png', 'c.webp'].map((name) => writeSidecars(join(dir, name), bounds, 400, 100)),
  );
  assert.deepEqual(paths, [
    [join(dir, 'a.tif.aux.xml'), join(dir, 'a.tfw'), join(dir, 'a.prj')],
    [join(dir, 'b.png.aux.xml'), join(dir, 'b.pgw'), join(dir, 'b.prj')],
    [join(dir, 'c.webp.aux.xml'), join(dir, 'c.wld'), join(dir, 'c.prj')],
  ]);
  assert.equal(await readFile(join(dir, 'a.prj'), 'utf8'), EPSG_3857_WKT);
  const aux = await readFile(join(dir, 'a.tif.aux.xml'), 'utf8');
  assert.match(aux, /<GeoTransform>-1000, 10, 0, 4000, 0, -20<\/GeoTransform>/);
  assert.match(aux, /<SRS dataAxisToSRSAxisMapping="1,2">PROJCS\[&quot;WGS 84 \/ Pseudo-Mercator&quot;/);
});

test('a 3x2 grid stitches each tile into its cell, a null cell transparent, in one strip or many', async () => {
  const T = 32;
  const colours: [number, number, number][][] = [
    [
      [200, 10, 10],
      [10, 200, 10],
      [10, 10, 200],
    ],
    [
      [200, 200, 10],
      [10, 200, 200],
      [0, 0, 0],
    ],
  ];
  const files = await Promise.all(
    colours.flatMap((row, r) => row.map((c, col) => markedTile(join(dir, `cell-${col}-${r}.png`), T, c))),
  );
  const tileAt = (col: number, row: number) => (col === 2 && row === 1 ? null : files[row * 3 + col]!);
  const bounds = gridBounds(12, 2000, 1300, 3, 2);
  for (const stripRows of [1, undefined]) {
    const output = join(dir, `grid-${stripRows ?? 'default'}.tif`);
    const progress: number[] = [];
    const result = await stitchMosaic({
      cols: 3,
      rows: 2,
      tileSize: T,
      tileAt,
      output,
      extraFormats: [],
      bounds,
      ...(stripRows !== undefined ? { stripRows } : {}),
      onProgress: (n) => progress.push(n),
    });
    assert.deepEqual([result.width, result.height], [96, 64]);
    assert.deepEqual(progress, stripRows === 1 ? [1, 2] : [2]);
    assert.deepEqual(result.files, [
      output,
      `${output}.aux.xml`,
      output.replace(/\.tif$/, '.tfw'),
      output.replace(/\.tif$/, '.prj'),
    ]);
    const { data, info } = await sharp(output).raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([info.width, info.height, info.channels], [96, 64, 4]);
    for (let r = 0; r < 2; r++) {
      for (let c = 0; c < 3; c++) {
        const centre = pixelAt(data, 96, 4, c * T + T / 2, r * T + T / 2);
        const corner = pixelAt(data, 96, 4, c * T, r * T);
        if (c === 2 && r === 1) {
          assert.deepEqual([centre[3], corner[3]], [0, 0], 'the null cell is transparent');
        } else {
          assert.deepEqual(centre, [...colours[r]![c]!, 255], `cell ${c},${r}`);
          assert.deepEqual(corner, [255, 255, 255, 255], `cell ${c},${r} top-left marker`);
        }
      }
    }
  }
  // Nothing but the outputs is left beside them (the strips' temp dir is gone)...
  assert.deepEqual(
    (await readdir(dir)).filter((f) => f.startsWith('.')),
    [],
  );
  // ...and no deleted strip is still held open (by libvips' operation cache) with its disk space.
  if (existsSync('/proc/self/fd')) {
    const open = (await readdir('/proc/self/fd')).map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    });
    assert.deepEqual(
      open.filter((l) => l.includes('.stitch-')),
      [],
    );
  }
});

test('RGB, JPEG, paletted, grey, grey+alpha and 16-bit tiles all come out 8-bit RGBA; PNG and WebP copies hold the same pixels', async () => {
  const T = 32;
  const n = T * T;
  const fill = (channels: number, values: number[]) => {
    const b = Buffer.alloc(n * channels);
    for (let i = 0; i < n; i++) b.set(values, i * channels);
    return b;
  };
  const raw = (channels: 1 | 2 | 3 | 4, values: number[]) =>
    sharp(fill(channels, values), { raw: { width: T, height: T, channels } });
  const tiles: { name: string; make: () => sharp.Sharp; expect: Rgba; pngColourType?: number }[] = [
    { name: 'rgb.png', make: () => raw(3, [10, 20, 30]).png(), expect: [10, 20, 30, 255], pngColourType: 2 },
    { name: 'rgba.png', make: () => raw(4, [200, 100, 50, 128]).png(), expect: [200, 100, 50, 128], pngColourType: 6 },
    {
      name: 'palette.png',
      make: () => raw(4, [40, 80, 120, 64]).png({ palette: true }),
      expect: [40, 80, 120, 64],
      pngColourType: 3,
    },
    {
      name: 'grey.png',
      make: () => raw(1, [77]).toColourspace('b-w').png(),
      expect: [77, 77, 77, 255],
      pngColourType: 0,
    },
    {
      name: 'greyalpha.png',
      make: () => raw(2, [90, 30]).toColourspace('b-w').png(),
      expect: [90, 90, 90, 30],
      pngColourType: 4,
    },
    {
      name: 'rgba16.png',
      make: () => raw(4, [250, 5, 128, 200]).toColourspace('rgb16').png(),
      expect: [250, 5, 128, 200],
      pngColourType: 6,
    },
    { name: 'photo.jpg', make: () => raw(3, [60, 160, 220]).jpeg({ quality: 100 }), expect: [60, 160, 220, 255] },
  ];
  const files: string[] = [];
  for (const t of tiles) {
    const path = join(dir, `fmt-${t.name}`);
    await t.make().toFile(path);
    if (t.pngColourType !== undefined)
      assert.equal((await readFile(path))[25], t.pngColourType, `${t.name} PNG colour type`);
    files.push(path);
  }
  const output = join(dir, 'formats.tif');
  const cols = 4;
  const result = await stitchMosaic({
    cols,
    rows: 2,
    tileSize: T,
    tileAt: (c, r) => files[r * cols + c] ?? null,
    output,
    extraFormats: ['png', 'webp'],
    bounds: gridBounds(9, 100, 200, cols, 2),
  });
  const png = join(dir, 'formats.png');
  const webp = join(dir, 'formats.webp');
  for (const f of [
    output,
    png,
    webp,
    `${png}.aux.xml`,
    join(dir, 'formats.pgw'),
    `${webp}.aux.xml`,
    join(dir, 'formats.wld'),
  ]) {
    assert.ok(result.files.includes(f), `${f} listed`);
  }
  const tif = await sharp(output).raw().toBuffer({ resolveWithObject: true });
  const meta = await sharp(output).metadata();
  assert.deepEqual([meta.channels, meta.depth, meta.space], [4, 'uchar', 'srgb']);
  tiles.forEach((t, i) => {
    const x = (i % cols) * T + T / 2;
    const y = Math.floor(i / cols) * T + T / 2;
    const j = (y * cols * T + x) * 4;
    const got = [...tif.data.subarray(j, j + 4)];
    // JPEG is lossy even at quality 100 (chroma rounding): a couple of levels.
    got.forEach((v, k) =>
      assert.ok(
        Math.abs(v - t.expect[k]!) <= (t.name.endsWith('.jpg') ? 3 : 0),
        `${t.name}: ${got.join(',')} != ${t.expect.join(',')}`,
      ),
    );
  });
  const last = (tif.data.length / 4 - 1) * 4;
  assert.equal(tif.data[last + 3], 0, 'the eighth cell (null) is transparent');
  for (const copy of [png, webp]) {
    const other = await sharp(copy).raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([other.info.width, other.info.height, other.info.channels], [tif.info.width, tif.info.height, 4]);
    assert.ok(other.data.equals(tif.data), `${copy} has the TIFF's pixels`);
  }
});

test('a tile of the wrong size is rejected naming the file and its size; nothing is left behind', async () => {
  const sub = join(dir, 'wrong');
  await mkdir(sub);
  const good = await markedTile(join(sub, 'good.png'), 32, [1, 2, 3]);
  const bad = await markedTile(join(sub, 'bad-tile.png'), 40, [1, 2, 3]);
  const output = join(sub, 'wrong.tif');
  await assert.rejects(
    stitchMosaic({
      cols: 3,
      rows: 1,
      tileSize: 32,
      tileAt: (c) => (c === 1 ? bad : good),
      output,
      extraFormats: [],
      bounds: gridBounds(5, 1, 1, 3, 1),
    }),
    (err: Error) => {
      assert.ok(err instanceof StitchInputError);
      assert.match(err.message, /bad-tile\.png/);
      assert.match(err.message, /40x40 px, expected 32x32/);
      assert.match(err.message, /col 1, row 0/);
      return true;
    },
  );
  assert.deepEqual((await readdir(sub)).sort(), ['bad-tile.png', 'good.png']);
  // A missing tile file is named too.
  await assert.rejects(
    stitchMosaic({
      cols: 1,
      rows: 1,
      tileSize: 32,
      tileAt: () => join(sub, 'missing.png'),
      output,
      extraFormats: [],
      bounds: gridBounds(5, 1, 1, 1, 1),
    }),
    /tile \(col 0, row 0\) .*missing\.png/,
  );
  // WebP holds at most 16383 px a side, and libwebp the whole image in memory: refused before any work.
  for (const [cols, rows] of [
    [65, 1],
    [40, 40],
  ] as const) {
    await assert.rejects(
      stitchMosaic({
        cols,
        rows,
        tileSize: 256,
        tileAt: () => null,
        output,
        extraFormats: ['webp'],
        bounds: gridBounds(8, 1, 1, cols, rows),
      }),
      (err: Error) => err instanceof StitchInputError && /too large for a WebP copy/.test(err.message),
    );
  }
  assert.deepEqual((await readdir(sub)).sort(), ['bad-tile.png', 'good.png']);
});

test('strips left by an attempt killed mid-stitch are removed by the next one, a stitch still writing is not', async () => {
  const sub = join(dir, 'leftover');
  await mkdir(sub);
  const output = join(sub, 'm.tif');
  const stale = join(sub, '.m.tif.stitch-dead01');
  await mkdir(stale);
  await writeFile(join(stale, 'strip-000000.v'), Buffer.alloc(1024));
  const longAgo = new Date(Date.now() - 3_600_000);
  for (const f of [join(stale, 'strip-000000.v'), stale]) await utimes(f, longAgo, longAgo);
  // One written to a moment ago may be a stitch still running; another output's is not this stitch's business.
  const live = join(sub, '.m.tif.stitch-live01');
  await mkdir(live);
  await writeFile(join(live, 'mosaic.tif'), Buffer.alloc(16));
  await mkdir(join(sub, '.other.tif.stitch-old01'));
  await utimes(join(sub, '.other.tif.stitch-old01'), longAgo, longAgo);
  const tile = await markedTile(join(sub, 't.png'), 32, [10, 20, 30]);
  await stitchMosaic({
    cols: 1,
    rows: 1,
    tileSize: 32,
    tileAt: () => tile,
    output,
    extraFormats: [],
    bounds: gridBounds(5, 1, 1, 1, 1),
  });
  const left = (await readdir(sub)).filter((n) => n.includes('.stitch-')).sort();
  assert.deepEqual(left, ['.m.tif.stitch-live01', '.other.tif.stitch-old01']);
});

test('an error thrown by onProgress (a cancelled heartbeat) stops the stitch and cleans up', async () => {
  const sub = join(dir, 'progress');
  await mkdir(sub);
  const tile = await markedTile(join(sub, 't.png'), 16, [9, 9, 9]);
  await assert.rejects(
    stitchMosaic({
      cols: 2,
      rows: 3,
      tileSize: 16,
      stripRows: 1,
      tileAt: () => tile,
      output: join(sub, 'p.tif'),
      extraFormats: [],
      bounds: gridBounds(6, 1, 1, 2, 3),
      onProgress: (n) => {
        if (n === 2) throw new Error('cancelled');
      },
    }),
    /cancelled/,
  );
  assert.deepEqual(await readdir(sub), ['t.png']);
});

test(
  'GDAL reads the TIFF and the PNG as EPSG:3857 with the planned geotransform, the TIFF tiled 256 with overviews',
  { skip: !hasGdal && 'gdalinfo is not installed' },
  async () => {
    const T = 256;
    const cols = 9;
    const rows = 7;
    const tiles = await Promise.all(
      Array.from({ length: 4 }, async (_, k) => {
        const raw = Buffer.alloc(T * T * 3);
        for (let i = 0; i < T * T; i++)
          raw.set([(i + k * 50) & 255, ((i >> 8) * 3 + k) & 255, (i ^ (i >> 8)) & 255], i * 3);
        const path = join(dir, `real-${k}.png`);
        await sharp(raw, { raw: { width: T, height: T, channels: 3 } })
          .png()
          .toFile(path);
        return path;
      }),
    );
    const bounds = gridBounds(14, 8_000, 5_000, cols, rows);
    const output = join(dir, 'georef.tif');
    const run = () =>
      stitchMosaic({
        cols,
        rows,
        tileSize: T,
        tileAt: (c, r) => ((c + r) % 5 === 4 ? null : tiles[(c * 3 + r) % 4]!),
        output,
        extraFormats: ['png'],
        bounds,
        stripRows: 3,
      });
    await run();
    // A retry overwrites the same files cleanly.
    const result = await run();
    const expected = geoTransform(bounds, cols * T, rows * T);
    // Strips of 3, 3 and 1 tile rows: the short last strip lands where it belongs.
    const mosaic = await sharp(output).raw().toBuffer();
    const sources = await Promise.all(tiles.map((f) => sharp(f).ensureAlpha().raw().toBuffer()));
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const [x, y] = [c * T + 100, r * T + 50];
        const got = pixelAt(mosaic, cols * T, 4, x, y);
        const want = (c + r) % 5 === 4 ? [0, 0, 0, 0] : pixelAt(sources[(c * 3 + r) % 4]!, T, 4, 100, 50);
        assert.deepEqual(got, want, `cell ${c},${r}`);
      }
    }

    const tif = gdalinfo(output);
    assert.deepEqual(tif.size, [cols * T, rows * T]);
    assertGeoref(tif, expected, 'tif');
    assert.equal(tif.bands.length, 4);
    assert.deepEqual(
      tif.bands.map((b) => b.colorInterpretation),
      ['Red', 'Green', 'Blue', 'Alpha'],
    );
    for (const b of tif.bands) {
      assert.equal(b.type, 'Byte');
      assert.deepEqual(b.block, [256, 256]);
    }
    assert.ok((tif.bands[0]!.overviews ?? []).length >= 2, 'overviews');
    assert.deepEqual(tif.bands[0]!.overviews![0]!.size, [Math.ceil((cols * T) / 2), Math.ceil((rows * T) / 2)]);
    assert.equal(tif.metadata?.IMAGE_STRUCTURE?.COMPRESSION, 'DEFLATE');
    assert.equal(tif.metadata?.IMAGE_STRUCTURE?.PREDICTOR, '2');

    // The TIFF alone, with no sidecar: its own GeoTIFF tags give GDAL the CRS and the grid, and it is a COG.
    const alone = join(dir, 'alone');
    await mkdir(alone);
    await copyFile(output, join(alone, 'georef.tif'));
    const own = gdalinfo(join(alone, 'georef.tif'));
    assertGeoref(own, expected, 'tif alone');
    assert.deepEqual(own.files, [join(alone, 'georef.tif')], 'no sidecar read');
    const validator = spawnSync(
      '/usr/bin/python3',
      ['-m', 'osgeo_utils.samples.validate_cloud_optimized_geotiff', '--full-check=yes', join(alone, 'georef.tif')],
      { encoding: 'utf8' },
    );
    // GDAL's COG validator (Debian's python3-gdal, which .ci/run installs beside gdal-bin).
    assert.match(validator.stdout, /is a valid cloud optimized GeoTIFF/, `${validator.stdout}${validator.stderr}`);

    const png = join(dir, 'georef.png');
    const pngInfo = gdalinfo(png);
    assertGeoref(pngInfo, expected, 'png');
    assert.equal(pngInfo.bands.length, 4);

    // The world file alone (no aux.xml) gives GDAL the same grid.
    const bare = join(dir, 'bare');
    await mkdir(bare);
    await copyFile(png, join(bare, 'georef.png'));
    await copyFile(join(dir, 'georef.pgw'), join(bare, 'georef.pgw'));
    const fromWorld = gdalinfo(join(bare, 'georef.png'));
    fromWorld.geoTransform!.forEach((v, i) =>
      assert.ok(Math.abs(v - expected[i]!) <= 1e-6, `world file geoTransform[${i}]`),
    );

    assert.deepEqual(
      result.files.sort(),
      [
        output,
        `${output}.aux.xml`,
        join(dir, 'georef.tfw'),
        join(dir, 'georef.prj'),
        png,
        `${png}.aux.xml`,
        join(dir, 'georef.pgw'),
      ].sort(),
    );
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.startsWith('.') || f.includes('tmp')),
      [],
    );
  },
);

test('sidecars: false writes the TIFF alone, georeferenced inside; the PNG copy keeps its sidecars, its only georeferencing', async (t) => {
  const T = 256;
  const tile = await markedTile(join(dir, 'lone-tile.png'), T, [30, 120, 200]);
  const out = join(dir, 'lone');
  await mkdir(out);
  const output = join(out, 'lone.tif');
  const png = join(out, 'lone.png');
  const bounds = gridBounds(13, 4_200, 2_900, 3, 2);
  // An earlier run with sidecars left its own, for another grid: GDAL would read that .aux.xml first.
  const earlier = await stitchMosaic({
    cols: 2,
    rows: 1,
    tileSize: T,
    tileAt: () => tile,
    output,
    extraFormats: [],
    bounds: gridBounds(12, 100, 100, 2, 1),
  });
  assert.ok(earlier.files.includes(`${output}.aux.xml`));
  const result = await stitchMosaic({
    cols: 3,
    rows: 2,
    tileSize: T,
    tileAt: () => tile,
    output,
    extraFormats: ['png'],
    sidecars: false,
    bounds,
  });
  assert.deepEqual(
    result.files.sort(),
    [output, png, `${png}.aux.xml`, join(out, 'lone.pgw'), join(out, 'lone.prj')].sort(),
  );
  // The .prj beside it is the PNG's (same stem); no sidecar names the TIFF.
  assert.deepEqual((await readdir(out)).sort(), ['lone.pgw', 'lone.png', 'lone.png.aux.xml', 'lone.prj', 'lone.tif']);
  if (!hasGdal) return t.skip('gdalinfo is not installed');
  const alone = join(dir, 'lone-alone');
  await mkdir(alone);
  await copyFile(output, join(alone, 'lone.tif'));
  const info = gdalinfo(join(alone, 'lone.tif'));
  assertGeoref(info, geoTransform(bounds, 3 * T, 2 * T), 'tif without sidecars');
  assert.deepEqual(info.files, [join(alone, 'lone.tif')], 'no sidecar read');
  // In place too: no stale sidecar is left to override the TIFF's own georeferencing.
  assertGeoref(gdalinfo(output), geoTransform(bounds, 3 * T, 2 * T), 'tif in place');
});

test('the coverage mask is one 8-bit grey pixel per tile, georeferenced over the mosaic bounds', async (t) => {
  const cols = 5;
  const rows = 3;
  const value = (c: number, r: number) => [255, 160, 0][(c + r) % 3]!;
  const bounds = gridBounds(10, 300, 400, cols, rows);
  const path = join(dir, 'cov.mask.png');
  await writeFile(path, 'stale content from an earlier attempt');
  const files = await writeCoverageMask(path, cols, rows, value, bounds);
  assert.deepEqual(files, [path, `${path}.aux.xml`, join(dir, 'cov.mask.pgw'), join(dir, 'cov.mask.prj')]);
  const bytes = await readFile(path);
  assert.deepEqual([bytes[24], bytes[25]], [8, 0], 'PNG bit depth 8, colour type grey');
  assert.equal((await sharp(path).metadata()).channels, 1);
  // sharp would hand a grey image back as RGB: ask for the one band.
  const { data, info } = await sharp(path).toColourspace('b-w').raw().toBuffer({ resolveWithObject: true });
  assert.deepEqual([info.width, info.height, info.channels], [cols, rows, 1]);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) assert.equal(data[r * cols + c], value(c, r), `mask ${c},${r}`);
  await assert.rejects(
    writeCoverageMask(path, 2, 2, () => 256, bounds),
    RangeError,
  );

  if (!hasGdal) return t.skip('gdalinfo is not installed');
  const info2 = gdalinfo(path);
  assertGeoref(info2, geoTransform(bounds, cols, rows), 'mask');
  assert.deepEqual(
    info2.bands.map((b) => [b.type, b.colorInterpretation]),
    [['Byte', 'Gray']],
  );
  // One mask pixel covers exactly one tile.
  const tile = tileBounds(10, 300, 400);
  assert.ok(Math.abs(info2.geoTransform![1]! - (tile.maxX - tile.minX)) < 1e-6);
});
