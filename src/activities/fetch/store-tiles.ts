/** Storing a unit's good answer: its tiles (cut from a metatile, or kept whole as a chunk), or a 304's renewal. */
import { createHash } from 'node:crypto';
import type { TileAddress } from '../../sources/request-url';
import type { HttpExchange } from '../http/fetch-url';
import type { StoredTile, Tiles } from '../tile-store/tiles';
import { storageFor } from '../storage/storage';
import type { Verdict } from '../validate/classify';
import type { TileResult } from './batch-types';
import { cutMetatile } from './metatiles';
import { markServed } from './served-records';
import { shapeRecord, type UnitCall } from './unit-call';

/** A good answer to store: the unit's request, what came back, and its verdict. */
export interface GoodAnswer {
  call: UnitCall;
  x: HttpExchange;
  verdict: Verdict;
}

/** A 304 to a conditional request: the stored copy it named. */
export interface NotModified {
  call: UnitCall;
  x: HttpExchange;
  stored: StoredTile;
}

/** A 304: the stored copy stands, renewed; the shape is recorded served. */
export async function storeNotModified({ call, x, stored }: NotModified): Promise<TileResult[]> {
  const { store, input, tiles } = call;
  call.answered();
  await markServed(shapeRecord(call, call.now()));
  await renew({ store, sourceName: input.sourceName, tile: tiles[0]!, stored, at: call.now() });
  return tiles.map((t) => ({
    ...t,
    status: 'ok',
    kind: 'success',
    reason: 'not modified since the stored copy',
    attempts: call.tried.made,
    httpStatus: 304,
    latencyMs: x.latencyMs,
    path: stored.path,
    bytes: stored.meta.bytes,
  }));
}

/** A metatile kept whole (keepChunks): one chunk image, each tile's result pointing at its region of it. */
export async function storeChunk({ call, x, verdict: v }: GoodAnswer): Promise<TileResult[]> {
  const { store, input, source, unit, tiles } = call;
  call.answered();
  const file = await store.putChunk(input.sourceName, tiles[0]!.z, unit, x.body, source.format);
  await markServed(shapeRecord(call, call.now()));
  const m = unit.meta!;
  return tiles.map((t, k) => ({
    ...t,
    status: 'ok',
    kind: 'success',
    reason: `${v.reason}, kept whole (${tiles.length} tiles)`,
    attempts: call.tried.made,
    httpStatus: v.httpStatus,
    bytes: x.body.length,
    latencyMs: v.latencyMs,
    path: file,
    region: { left: m.left + m.cells[k]![0] * source.tileSize, top: m.top + m.cells[k]![1] * source.tileSize },
  }));
}

/** A tile stored as it came, or a metatile cut into its tiles, each stored. */
export async function storeTiles({ call, x, verdict: v }: GoodAnswer): Promise<TileResult[]> {
  const { store, input, source, unit, tiles } = call;
  call.answered();
  const bodies = unit.meta ? await cutMetatile(v.pixels!, unit.meta, source.tileSize, source.format) : [x.body];
  const meta = {
    fetchedAt: Date.now(),
    contentType: unit.meta ? source.format : (x.headers['content-type'] ?? source.format),
    ...(!unit.meta && x.headers['etag'] ? { etag: x.headers['etag'] } : {}),
    ...(!unit.meta && x.headers['last-modified'] ? { lastModified: x.headers['last-modified'] } : {}),
    width: source.tileSize,
    height: source.tileSize,
  };
  const saved = await Promise.all(tiles.map((t, k) => store.put(input.sourceName, t, bodies[k]!, meta)));
  await markServed(shapeRecord(call, call.now()));
  const reason = unit.meta ? `${v.reason}, cut into ${tiles.length} tiles` : v.reason;
  return tiles.map((t, k) => ({
    ...t,
    status: 'ok',
    kind: 'success',
    reason,
    attempts: call.tried.made,
    httpStatus: v.httpStatus,
    bytes: saved[k]!.bytes,
    latencyMs: v.latencyMs,
    path: saved[k]!.path,
  }));
}

/** The stored copy a 304 confirmed, to be renewed as fetched `at`. */
interface Renewal {
  store: Tiles;
  sourceName: string;
  tile: TileAddress;
  stored: StoredTile;
  at: number;
}

/**
 * A 304 confirmed the stored copy: it counts as fetched now, so the next refresh keeps it. Only the very copy
 * the request named (the store still gives it, with the same content), so a newer one another writer stored
 * meanwhile is never overwritten with the old; and only as a courtesy: if it cannot be done, the tile is still ok.
 */
async function renew({ store, sourceName, tile: t, stored, at }: Renewal): Promise<void> {
  try {
    const now = await store.get(sourceName, t);
    if (now?.path !== stored.path || now.meta.sha256 !== stored.meta.sha256) return;
    const body = await storageFor(now.path).read(now.path);
    if (!body || createHash('sha256').update(body).digest('hex') !== stored.meta.sha256) return;
    const { etag, lastModified, width, height, contentType } = stored.meta;
    await store.put(sourceName, t, body, {
      fetchedAt: at,
      contentType,
      ...(etag !== undefined ? { etag } : {}),
      ...(lastModified !== undefined ? { lastModified } : {}),
      ...(width !== undefined ? { width } : {}),
      ...(height !== undefined ? { height } : {}),
    });
  } catch {
    // The next refresh asks again.
  }
}
