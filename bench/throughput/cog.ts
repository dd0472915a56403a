/**
 * The COG comparison of bench:throughput: the same tiles (a plain run's tile store) written as a Cloud
 * Optimized GeoTIFF by tilebreaker's stitch (tiles, sharp's pyramidal TIFF, the COG rewrite with the
 * georeferencing inside) and by `gdal_translate -of COG` from a VRT of those tiles, with the same compression
 * (deflate, horizontal predictor), block size (256), overviews (halving down to one block, averaged) and CRS,
 * one after the other in the same run. GDAL's COG driver may use every core, as libvips does. Both files are
 * checked with GDAL's COG validator when it is installed, so a fast invalid file cannot pass for a result.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { geoTransform, type Bounds3857 } from '../../src/activities/mosaic/georef';
import { stitchMosaic } from '../../src/activities/mosaic/stitch';
import { TileStore } from '../../src/activities/tile-store/tile-store';

export interface CogFigures {
  tilebreakerS: number;
  /** null: gdal_translate is not installed, or failed. */
  gdalS: number | null;
  /** The validator's verdict per file ("valid", or its first complaint); null where it could not run. */
  valid: { tilebreaker: string | null; gdal: string | null };
}

export interface CogInput {
  /** The tile store a plain run filled, its source name, and the block of tiles. */
  storeRoot: string;
  source: string;
  z: number;
  x0: number;
  y0: number;
  side: number;
  bounds: Bounds3857;
  work: string;
}

const hasGdal = () => spawnSync('gdal_translate', ['--version']).status === 0;

export async function runCog(input: CogInput): Promise<CogFigures> {
  const { side, z, x0, y0, bounds, work } = input;
  const store = new TileStore(input.storeRoot);
  const tile = (c: number, r: number) => join(store.dir(input.source, { z, x: x0 + c, y: y0 + r }), `${y0 + r}.png`);
  for (const [c, r] of [
    [0, 0],
    [side - 1, side - 1],
  ] as const) {
    if (!existsSync(tile(c, r))) throw new Error(`bench:throughput cog: the plain run left no tile at ${tile(c, r)}`);
  }

  const ours = join(work, 'cog-tilebreaker.tif');
  let t = performance.now();
  await stitchMosaic({
    cols: side,
    rows: side,
    tileSize: 256,
    tileAt: tile,
    output: ours,
    extraFormats: [],
    sidecars: false,
    bounds,
  });
  const tilebreakerS = (performance.now() - t) / 1000;

  let gdalS: number | null = null;
  const theirs = join(work, 'cog-gdal.tif');
  if (hasGdal()) {
    const vrt = join(work, 'tiles.vrt');
    const { channels } = await sharp(tile(0, 0)).metadata();
    if (channels !== 3 && channels !== 4)
      throw new Error(`bench:throughput cog: tiles of ${channels} channels (3 or 4 expected)`);
    writeFileSync(vrt, tilesVrt(side, tile, bounds, channels === 4));
    const [x, xRes, , y, , yRes] = geoTransform(bounds, side * 256, side * 256);
    t = performance.now();
    const run = spawnSync(
      'gdal_translate',
      [
        '-q',
        '-of',
        'COG',
        '-co',
        'COMPRESS=DEFLATE',
        '-co',
        'PREDICTOR=YES',
        '-co',
        'BLOCKSIZE=256',
        '-co',
        'RESAMPLING=AVERAGE',
        '-co',
        'OVERVIEWS=IGNORE_EXISTING',
        '-co',
        'NUM_THREADS=ALL_CPUS',
        '-co',
        `BIGTIFF=${side * side * 256 * 256 * 4 * (4 / 3) > 0.9 * 2 ** 32 ? 'YES' : 'NO'}`,
        '-a_srs',
        'EPSG:3857',
        '-a_ullr',
        String(x),
        String(y),
        String(x + xRes * side * 256),
        String(y + yRes * side * 256),
        vrt,
        theirs,
      ],
      { encoding: 'utf8' },
    );
    gdalS = (performance.now() - t) / 1000;
    // A GDAL without the COG driver (before 3.1), or any failure: no figure, said why, the rest of the run goes on.
    if (run.status !== 0) {
      console.log(`  gdal_translate -of COG failed (${run.status}): ${run.stderr.trim().split('\n')[0]}`);
      gdalS = null;
    }
  }
  return {
    tilebreakerS,
    gdalS,
    valid: { tilebreaker: validate(ours), gdal: gdalS === null ? null : validate(theirs) },
  };
}

/** A VRT of the tiles in their grid: four bands (RGBA), one source per tile and band; RGB tiles are opaque. */
function tilesVrt(side: number, tile: (c: number, r: number) => string, bounds: Bounds3857, alpha: boolean): string {
  const size = side * 256;
  const gt = geoTransform(bounds, size, size).join(', ');
  const bands = ['Red', 'Green', 'Blue', 'Alpha'].map((interp, b) => {
    const sources: string[] = [];
    for (let r = 0; r < side; r++) {
      for (let c = 0; c < side; c++) {
        const rects = `<SrcRect xOff="0" yOff="0" xSize="256" ySize="256"/><DstRect xOff="${c * 256}" yOff="${r * 256}" xSize="256" ySize="256"/>`;
        const file = `<SourceFilename relativeToVRT="0">${tile(c, r)}</SourceFilename>`;
        // An RGB tile's alpha: its first band scaled to the constant 255.
        sources.push(
          b === 3 && !alpha
            ? `    <ComplexSource>${file}<SourceBand>1</SourceBand>${rects}<ScaleOffset>255</ScaleOffset><ScaleRatio>0</ScaleRatio></ComplexSource>`
            : `    <SimpleSource>${file}<SourceBand>${b + 1}</SourceBand>${rects}</SimpleSource>`,
        );
      }
    }
    return `  <VRTRasterBand dataType="Byte" band="${b + 1}">\n    <ColorInterp>${interp}</ColorInterp>\n${sources.join('\n')}\n  </VRTRasterBand>`;
  });
  return `<VRTDataset rasterXSize="${size}" rasterYSize="${size}">\n  <SRS>EPSG:3857</SRS>\n  <GeoTransform>${gt}</GeoTransform>\n${bands.join('\n')}\n</VRTDataset>\n`;
}

/** GDAL's COG validator on `file`: "valid", its first complaint, or null when the validator is not installed. */
function validate(file: string): string | null {
  const run = spawnSync('/usr/bin/python3', ['-m', 'osgeo_utils.samples.validate_cloud_optimized_geotiff', file], {
    encoding: 'utf8',
  });
  if (run.error || /No module named/.test(run.stderr)) return null;
  if (/is a valid cloud optimized GeoTIFF/.test(run.stdout)) return 'valid';
  return (run.stdout + run.stderr).trim().split('\n').slice(0, 2).join(' ') || `exit ${run.status}`;
}
