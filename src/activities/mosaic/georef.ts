/**
 * Georeferencing of a north-up image (EPSG:3857, or a source grid's projected CRS) by sidecar files. sharp (libvips) cannot write GeoTIFF tags,
 * so GDAL and GIS tools learn the CRS and the pixel grid from files beside the image: a GDAL PAM
 * `<image>.aux.xml` (read first by GDAL's default GDAL_GEOREF_SOURCES), a world file and a `.prj`.
 * Pure helpers except `writeSidecars`.
 */
import { randomBytes } from 'node:crypto';
import { rename, unlink, writeFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { epsgCode, KNOWN_CRS } from '../../geo/crs';

/** An image's bounds in EPSG:3857, or in `crs` (a projected CRS, `EPSG:<code>`) when a source grid has its own. */
export interface Bounds3857 {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
  crs?: string | undefined;
}

/** The EPSG code of the bounds' CRS. */
export function boundsEpsg(bounds: Bounds3857): number {
  if (bounds.crs === undefined) return 3857;
  const code = epsgCode(bounds.crs);
  if (code === null) throw new RangeError(`georef: crs must be EPSG:<code> (got ${JSON.stringify(bounds.crs)})`);
  return code;
}

/** OGC WKT1 of the bounds' CRS, or null for a code tilebreaker does not know (GDAL resolves the code itself). */
export function boundsWkt(bounds: Bounds3857): string | null {
  const code = boundsEpsg(bounds);
  return code === 3857 ? EPSG_3857_WKT : (KNOWN_CRS[code]?.wkt ?? null);
}

export type GeoTransform = [number, number, number, number, number, number];

/**
 * WGS 84 / Pseudo-Mercator as OGC WKT1 (what `gdalsrsinfo -o wkt1 EPSG:3857` prints, on one line). The
 * AUTHORITY node makes GDAL report EPSG:3857; ArcGIS and QGIS read it from a `.prj` as well.
 */
export const EPSG_3857_WKT =
  'PROJCS["WGS 84 / Pseudo-Mercator",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,' +
  'AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],' +
  'UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG","4326"]],' +
  'PROJECTION["Mercator_1SP"],PARAMETER["central_meridian",0],PARAMETER["scale_factor",1],' +
  'PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],' +
  'AXIS["Easting",EAST],AXIS["Northing",NORTH],' +
  'EXTENSION["PROJ4","+proj=merc +a=6378137 +b=6378137 +lat_ts=0 +lon_0=0 +x_0=0 +y_0=0 +k=1 +units=m +nadgrids=@null +wktext +no_defs"],' +
  'AUTHORITY["EPSG","3857"]]';

/** GDAL geotransform [originX, pixelW, 0, originY, 0, -pixelH] for an image of width x height covering bounds. */
export function geoTransform(bounds: Bounds3857, width: number, height: number): GeoTransform {
  checkGrid(bounds, width, height);
  return [bounds.minX, (bounds.maxX - bounds.minX) / width, 0, bounds.maxY, 0, -(bounds.maxY - bounds.minY) / height];
}

/**
 * World file text (6 lines: A D B E C F, C/F the CENTRE of the top-left pixel, unlike the geotransform's
 * corner). Fixed notation with at least 10 decimals and as many more as the value needs to read back exactly:
 * some world-file readers do not accept exponents, and at high zooms a pixel is a few centimetres.
 */
export function worldFile(bounds: Bounds3857, width: number, height: number): string {
  const [x0, pw, rx, y0, ry, ph] = geoTransform(bounds, width, height);
  return [pw, ry, rx, ph, x0 + pw / 2, y0 + ph / 2].map(fixed).join('\n') + '\n';
}

/** The GDAL PAM dataset (`<image>.aux.xml`) text: SRS and geotransform, as GDAL itself writes them. */
export function pamXml(bounds: Bounds3857, width: number, height: number): string {
  // Shortest round-trip text: GDAL parses exponents here, and the geotransform must read back exactly.
  const gt = geoTransform(bounds, width, height)
    .map((v) => String(v))
    .join(', ');
  // A code without WKT here is given as GDAL's user input (`EPSG:<code>`), which it resolves from its database.
  const srs = boundsWkt(bounds) ?? `EPSG:${boundsEpsg(bounds)}`;
  // The geotransform is easting then northing. For EPSG:3857 the mapping says so; for a grid's CRS, whose axes
  // may be northing first (EPSG:3035), none is written, and GDAL then reads the traditional GIS order.
  const mapping = bounds.crs === undefined ? ' dataAxisToSRSAxisMapping="1,2"' : '';
  return (
    '<PAMDataset>\n' +
    `  <SRS${mapping}>${escapeXml(srs)}</SRS>\n` +
    `  <GeoTransform>${gt}</GeoTransform>\n` +
    '</PAMDataset>\n'
  );
}

/** The world-file extension GDAL and GIS tools look for beside an image of this extension. */
export function worldFileExtension(imagePath: string): string {
  switch (extname(imagePath).toLowerCase()) {
    case '.tif':
    case '.tiff':
      return '.tfw';
    case '.png':
      return '.pgw';
    case '.jpg':
    case '.jpeg':
      return '.jgw';
    default:
      // No convention for WebP and others: `.wld` is the generic one GDAL also tries.
      return '.wld';
  }
}

/**
 * The sidecars an earlier run may have left beside `imagePath` (a path or an object URL) that a run without
 * sidecars removes: they would describe another grid, and GDAL reads an .aux.xml before the TIFF's own tags.
 * The .prj stays when `prjShared` (a copy in another format, written just now, shares the stem and the CRS).
 */
export function staleSidecars(imagePath: string, prjShared: boolean): string[] {
  const stem = imagePath.slice(0, imagePath.length - extname(imagePath).length);
  return [`${imagePath}.aux.xml`, stem + worldFileExtension(imagePath), ...(prjShared ? [] : [`${stem}.prj`])];
}

/**
 * Writes `<image>.aux.xml` (PAMDataset with SRS and GeoTransform), the world file `<image minus ext>.tfw|.pgw|.wld`
 * and `<image minus ext>.prj`, each atomically (temp name then rename: a retry overwrites cleanly). Returns the
 * paths written.
 */
export async function writeSidecars(
  imagePath: string,
  bounds: Bounds3857,
  width: number,
  height: number,
): Promise<string[]> {
  const stem = imagePath.slice(0, imagePath.length - extname(imagePath).length);
  const wkt = boundsWkt(bounds);
  const files: [string, string][] = [
    [`${imagePath}.aux.xml`, pamXml(bounds, width, height)],
    [stem + worldFileExtension(imagePath), worldFile(bounds, width, height)],
    // A .prj holds WKT: none for a CRS known only by its code (the .aux.xml names it).
    ...(wkt !== null ? [[`${stem}.prj`, wkt] as [string, string]] : []),
  ];
  for (const [path, text] of files) await atomicWriteText(path, text);
  return files.map(([path]) => path);
}

async function atomicWriteText(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await writeFile(tmp, text);
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

function checkGrid(bounds: Bounds3857, width: number, height: number): void {
  if (!Number.isInteger(width) || width < 1 || !Number.isInteger(height) || height < 1) {
    throw new RangeError(`georef: width and height must be positive integers (got ${width}x${height})`);
  }
  const { minX, minY, maxX, maxY } = bounds;
  if (![minX, minY, maxX, maxY].every(Number.isFinite) || !(maxX > minX) || !(maxY > minY)) {
    throw new RangeError(`georef: bounds must be finite with max > min (got ${JSON.stringify(bounds)})`);
  }
}

/** Fixed notation, >= 10 decimals, exact when read back (toFixed allows up to 100 digits). */
function fixed(v: number): string {
  if (v === 0) return '0.0000000000'; // also turns -0 into 0
  for (let digits = 10; digits < 100; digits++) {
    const text = v.toFixed(digits);
    if (Number(text) === v) return text;
  }
  return v.toFixed(100);
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
