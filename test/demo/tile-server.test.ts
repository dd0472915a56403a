import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { lonLatToMeters, lonLatToTile, ORIGIN_SHIFT_M, TILE_SIZE } from '../../src/geo/mercator';

// The demo tile server draws Natural Earth geography: these checks look at the pixels of real tiles.

let s: DemoTileServer;
before(async () => {
  s = await startDemoTileServer({ validators: true });
});
after(() => s.close());

interface Tile {
  data: Buffer;
  channels: number;
  etag: string | null;
  bytes: Buffer;
}

async function tile(z: number, x: number, y: number): Promise<Tile> {
  const res = await fetch(`${s.url}/${z}/${x}/${y}.png`);
  assert.equal(res.status, 200, `${z}/${x}/${y}`);
  const bytes = Buffer.from(await res.arrayBuffer());
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  assert.deepEqual([info.width, info.height], [TILE_SIZE, TILE_SIZE]);
  return { data, channels: info.channels, etag: res.headers.get('etag'), bytes };
}

const rgb = (t: Tile, px: number, py: number): [number, number, number] => {
  const i = (py * TILE_SIZE + px) * t.channels;
  return [t.data[i]!, t.data[i + 1]!, t.data[i + 2]!];
};
// The palette's families, told apart by hue: sea is blue, land a warm off-white, borders purple.
const isWater = ([r, , b]: [number, number, number]) => b - r > 25;
const isLand = ([r, g, b]: [number, number, number]) => r >= b && r > 200 && g > 200;
const isBorder = ([r, g, b]: [number, number, number]) => r - g > 12 && b - g > 12;

/** Share of the tile's pixels (outside the label's corner) that pass `f`. */
function share(t: Tile, f: (c: [number, number, number]) => boolean): number {
  let n = 0;
  let all = 0;
  for (let py = 0; py < TILE_SIZE; py++)
    for (let px = 0; px < TILE_SIZE; px++) {
      if (px < 80 && py < 16) continue;
      all++;
      if (f(rgb(t, px, py))) n++;
    }
  return n / all;
}

test('open sea is water-coloured and the middle of a continent land-coloured', async () => {
  const [ax, ay] = lonLatToTile(-35, 35, 5); // the mid-Atlantic, between the Azores and Bermuda
  const atlantic = await tile(5, ax, ay);
  assert.equal(share(atlantic, isWater), 1, 'every pixel of the mid-Atlantic is sea');
  for (const [lon, lat, z, where] of [
    [100, 62, 5, 'central Siberia'],
    [8, 24, 6, 'the central Sahara'],
  ] as const) {
    const [x, y] = lonLatToTile(lon, lat, z);
    const t = await tile(z, x, y);
    assert.equal(share(t, isWater), 0, `no sea in ${where}`);
    assert.ok(share(t, isLand) > 0.97, `${where} is land`);
  }
});

test('a coast that crosses the edge between two tiles meets itself there; a tile out of place does not', async () => {
  // Zoom 6 along the coasts of Italy and the Adriatic: the pairs whose shared edge has land and sea.
  const z = 6;
  const kind = (c: [number, number, number]) => (isWater(c) ? 'w' : isLand(c) ? 'l' : '-');
  const column = (t: Tile, px: number) => Array.from({ length: TILE_SIZE }, (_, py) => kind(rgb(t, px, py)));
  const disagree = (a: string[], b: string[]) => a.filter((k, i) => k !== b[i]).length;
  let crossings = 0;
  let misplacedShows = 0;
  for (let y = 22; y <= 24; y++)
    for (let x = 33; x <= 35; x++) {
      const [left, right, farther] = await Promise.all([tile(z, x, y), tile(z, x + 1, y), tile(z, x + 2, y)]);
      const a = column(left, TILE_SIZE - 1);
      if (!a.includes('w') || !a.includes('l')) continue;
      crossings++;
      // Two neighbouring columns differ where a coast runs slantwise; across the edge they may differ as much, no more.
      const within = Math.max(disagree(column(left, TILE_SIZE - 2), a), disagree(column(right, 0), column(right, 1)));
      const across = disagree(a, column(right, 0));
      assert.ok(
        across <= within + 2,
        `${z}/${x}/${y} | ${x + 1}: ${across} rows of the shared edge disagree (land/sea), ${within} between neighbouring columns`,
      );
      // The tile after next put in the right one's place: its edge does not continue the left one's.
      if (disagree(a, column(farther, 0)) > within + 8) misplacedShows++;
    }
  assert.ok(crossings >= 3, `a coast crosses ${crossings} of the shared edges looked at`);
  assert.ok(misplacedShows >= 1, 'a tile out of place shows at its edge');
});

test('over the Alps at the demo zoom, country borders are drawn where they are', async () => {
  // The tripoint of France, Germany and Switzerland at Basel: three borders meet in this tile.
  const z = 10;
  const [lon, lat] = [7.5886, 47.5895];
  const [x, y] = lonLatToTile(lon, lat, z);
  const t = await tile(z, x, y);
  assert.ok(share(t, isBorder) > 0.005, `border pixels: ${(share(t, isBorder) * 100).toFixed(2)} %`);
  const [mx, my] = lonLatToMeters(lon, lat);
  const span = (2 * ORIGIN_SHIFT_M) / 2 ** z;
  const px = Math.floor(((mx + ORIGIN_SHIFT_M) / span - x) * TILE_SIZE);
  const py = Math.floor(((ORIGIN_SHIFT_M - my) / span - y) * TILE_SIZE);
  let near = false;
  for (let dy = -6; dy <= 6; dy++)
    for (let dx = -6; dx <= 6; dx++)
      near ||= isBorder(rgb(t, Math.min(255, Math.max(0, px + dx)), Math.min(255, Math.max(0, py + dy))));
  assert.ok(near, `a border passes within 6 px of the tripoint (${px}, ${py})`);
  // ...and none in the middle of a country (Paris).
  const [ix, iy] = lonLatToTile(2.35, 48.86, z);
  assert.equal(share(await tile(z, ix, iy), isBorder), 0, 'no border around Paris');
});

test('tiles are served from a cache until a redraw, which gives every tile new bytes and a new ETag', async () => {
  const [ax, ay] = lonLatToTile(-35, 35, 5);
  const [bx, by] = lonLatToTile(7.5, 46.5, 10);
  const first = await Promise.all([tile(5, ax, ay), tile(10, bx, by)]);
  const again = await Promise.all([tile(5, ax, ay), tile(10, bx, by)]);
  for (let i = 0; i < 2; i++) {
    assert.ok(first[i]!.bytes.equals(again[i]!.bytes), 'the same tile twice: the same bytes');
    assert.equal(first[i]!.etag, again[i]!.etag);
  }
  s.redraw();
  const redrawn = await Promise.all([tile(5, ax, ay), tile(10, bx, by)]);
  for (let i = 0; i < 2; i++) {
    assert.ok(!first[i]!.bytes.equals(redrawn[i]!.bytes), 'a redrawn tile has other bytes (open sea too)');
    assert.notEqual(first[i]!.etag, redrawn[i]!.etag);
  }
  // 304 for the current ETag only.
  const cur = await fetch(`${s.url}/10/${bx}/${by}.png`, { headers: { 'if-none-match': redrawn[1].etag! } });
  assert.equal(cur.status, 304);
  const old = await fetch(`${s.url}/10/${bx}/${by}.png`, { headers: { 'if-none-match': first[1].etag! } });
  assert.equal(old.status, 200);
  await old.arrayBuffer();
  assert.ok(s.tileBytes > 2_000 && s.tileBytes < 30_000, `a typical tile is ${s.tileBytes} bytes`);
});

test('a tile is counted served once its answer has gone out: requests the server was closed under while it rendered are not (the fleet soak counts duplicates by it)', async () => {
  const served: string[] = [];
  const slow = await startDemoTileServer({ latencyMs: 300, onServed: (p) => served.push(p) });
  const asked = ['/5/16/10.png', '/5/16/11.png', '/5/17/10.png'].map((p) =>
    fetch(`${slow.url}${p}`).then(
      (r) => r.status,
      () => 'reset',
    ),
  );
  // Mid-render: every connection is closed under its request.
  await new Promise((r) => setTimeout(r, 100));
  await slow.close();
  assert.deepEqual(await Promise.all(asked), ['reset', 'reset', 'reset']);
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(served.length, 0, `counted served: ${served.join(', ')}`);
  assert.equal(slow.stats.ok, 0);
  // A server that stays up counts what it answers.
  const steady = await startDemoTileServer({ onServed: (p) => served.push(p) });
  try {
    assert.equal((await fetch(`${steady.url}/5/16/10.png`)).status, 200);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual([...served], ['/5/16/10.png']);
  } finally {
    await steady.close();
  }
});
