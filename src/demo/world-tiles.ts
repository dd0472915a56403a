/**
 * The demo tile server's map: land, coastlines and country borders from Natural Earth (public domain), as
 * redistributed in TopoJSON by the world-atlas package (ISC), projected in spherical Web Mercator for each
 * 256 px XYZ tile and drawn as an SVG that sharp renders to PNG. Every tile is cut from the same world, so a
 * stitched mosaic is a correct map and a tile put in the wrong place shows.
 */
import sharp from 'sharp';
import { TILE_SIZE } from '../geo/mercator';
import { clipLine, clipRing, paths, type View } from './tile-clip';
import { scaleFor, world } from './world-data';

export { scaleFor, world, type WorldScale } from './world-data';

/** Colours of one drawing of the map; `generation` shifts them a little, so a redraw changes every tile. */
function palette(generation: number): { water: string; land: string; coast: string; border: string; label: string } {
  const g = ((generation % 6) + 6) % 6;
  const hex = (r: number, gr: number, b: number) =>
    `#${[r, gr, b].map((c) => c.toString(16).padStart(2, '0')).join('')}`;
  return {
    water: hex(170 - g * 2, 211 - g, 223),
    land: hex(242 - g, 239 - g * 2, 233),
    coast: hex(120, 164, 186),
    border: hex(150, 120, 160),
    label: hex(80, 80, 80),
  };
}

// Strokes of each character of the label on a 3 x 5 grid: no font needed, the same glyphs on every machine.
const GLYPHS: Record<string, string> = {
  '0': 'M0 0H3V5H0Z',
  '1': 'M1.5 0V5',
  '2': 'M0 0H3V2.5H0V5H3',
  '3': 'M0 0H3V5H0M0 2.5H3',
  '4': 'M0 0V2.5H3M3 0V5',
  '5': 'M3 0H0V2.5H3V5H0',
  '6': 'M3 0H0V5H3V2.5H0',
  '7': 'M0 0H3V5',
  '8': 'M0 0H3V5H0ZM0 2.5H3',
  '9': 'M3 2.5H0V0H3V5H0',
  '/': 'M0 5L3 0',
};

/** The tile's address, z/x/y, small and faint in the top-left corner. */
function label(text: string, colour: string, top = 4): string {
  const d = [...text]
    .map((c, i) => `<path transform="translate(${4 + i * 6} ${top}) scale(1.2)" d="${GLYPHS[c] ?? ''}"/>`)
    .join('');
  return `<g fill="none" stroke="${colour}" stroke-opacity="0.45" stroke-width="0.8">${d}</g>`;
}

/** The SVG of tile z/x/y (XYZ scheme: y counts down from the north). */
export function tileSvg(z: number, x: number, y: number, generation = 0): string {
  const w = world(scaleFor(z));
  const n = 2 ** z;
  // Columns past either side of the world wrap round it, as the map does.
  const v: View = { scale: TILE_SIZE * n, left: (((x % n) + n) % n) * TILE_SIZE, top: y * TILE_SIZE };
  const c = palette(generation);
  const land = paths(w.land, v, clipRing);
  const coast = paths(w.coast, v, clipLine);
  const borders = paths(w.borders, v, clipLine);
  const borderWidth = z < 4 ? 0.8 : z < 8 ? 1.2 : 1.6;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${TILE_SIZE}" height="${TILE_SIZE}">`,
    `<rect width="${TILE_SIZE}" height="${TILE_SIZE}" fill="${c.water}"/>`,
    land ? `<path d="${land}" fill="${c.land}" fill-rule="evenodd"/>` : '',
    coast ? `<path d="${coast}" fill="none" stroke="${c.coast}" stroke-width="0.9" stroke-linejoin="round"/>` : '',
    borders
      ? `<path d="${borders}" fill="none" stroke="${c.border}" stroke-width="${borderWidth}" stroke-linejoin="round"/>`
      : '',
    label(`${z}/${x}/${y}`, c.label),
    // The drawing's number under it: the palette repeats, and a redraw must change every tile whatever its count.
    generation > 0 ? label(String(generation), c.label, 10) : '',
    '</svg>',
  ].join('');
}

/** Tile z/x/y as a PNG. */
export function renderTile(z: number, x: number, y: number, generation = 0): Promise<Buffer> {
  // A failure of the drawing rejects, as one of the render does: it must not throw out of a request handler.
  return Promise.resolve().then(() =>
    sharp(Buffer.from(tileSvg(z, x, y, generation)))
      .png()
      .toBuffer(),
  );
}
