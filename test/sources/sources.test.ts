import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/breaker';
import { tileBounds } from '../../src/geo/mercator';
import { geographicBbox, getMapUrl, tileUrl } from '../../src/sources/request-url';
import { parseSource, parseSourcesFile } from '../../src/sources/schema';

const rejects = (input: unknown, field: string, value: string) =>
  assert.throws(
    () => parseSource(input),
    (e: unknown) => e instanceof ConfigError && e.issues.some((i) => i.startsWith(`${field}:`) && i.includes(value)),
  );

describe('source configuration', () => {
  test('an xyz source gets documented defaults', () => {
    const s = parseSource({ type: 'xyz', url: 'https://tiles.example.com/{z}/{x}/{y}.png' });
    assert.equal(s.tileSize, 256);
    assert.equal(s.format, 'image/png');
    assert.equal(s.blankTiles, 'allow');
    assert.equal(s.concurrency, 8);
    assert.deepEqual(s.timeouts, { connectMs: 5_000, headersMs: 15_000, bodyMs: 30_000, totalMs: 60_000 });
  });

  test('bad values name the field and the value', () => {
    rejects({ type: 'xyz', url: 'ftp://x/{z}/{x}/{y}' }, 'url', '"ftp://x/{z}/{x}/{y}"');
    rejects({ type: 'xyz', url: 'https://tiles.example.com/a.png' }, 'url', '"https://tiles.example.com/a.png"');
    // Every placeholder is required: without {y} every row of a column would fetch the same tile.
    rejects({ type: 'xyz', url: 'https://t.example/{z}/{x}.png' }, 'url', 'missing {y}');
    rejects({ type: 'tms', url: 'https://t.example/{z}/{y}.png' }, 'url', 'missing {x}');
    rejects(
      { type: 'wmts-rest', url: 'https://w.example/wmts/{TileMatrix}/{TileRow}.png' },
      'url',
      'missing {TileCol}',
    );
    rejects({ type: 'xyz', url: 'https://u:p@tiles.example.com/{z}/{x}/{y}.png' }, 'url', 'credentials');
    rejects({ type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png', minZoom: 9, maxZoom: 3 }, 'minZoom', '(got 9)');
    rejects(
      { type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png', headers: { Authorization: 'Bearer x' } },
      'headers',
      'use auth',
    );
    rejects({ type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png', format: 'png' }, 'format', '(got "png")');
    rejects({ type: 'wms', url: 'http://w.example/wms', layers: [] }, 'layers', '(got [])');
    rejects({ type: 'wms', url: 'http://w.example/wms', layers: ['a', 'b'], styles: ['s'] }, 'styles', '(got ["s"])');
    rejects(
      { type: 'wms', url: 'http://w.example/wms', layers: ['a'], params: { bbox: '1' } },
      'params.bbox',
      'set by tilebreaker',
    );
    rejects({ type: 'wms', url: 'http://w.example/wms', layers: ['a'], version: '1.2.0' }, 'version', '(got "1.2.0")');
    rejects(
      { type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png', auth: { type: 'bearer', tokenEnv: 'my token' } },
      'auth.tokenEnv',
      '(got "my token")',
    );
    rejects({ type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png', colour: 'red' }, '(root)', '"colour"');
  });

  test('a sources file names its sources', () => {
    const f = parseSourcesFile({ sources: { osm: { type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png' } } });
    assert.equal(f.sources.osm?.type, 'xyz');
    assert.throws(
      () => parseSourcesFile({ sources: { 'bad name': { type: 'xyz', url: 'https://t.example/{z}/{x}/{y}.png' } } }),
      /sources: name "bad name" must be a source name: a letter or digit, then letters, digits/,
    );
  });
});

describe('mirrors', () => {
  const tile = (host: string, more: object = {}) => ({ type: 'xyz', url: `https://${host}/{z}/{x}/{y}.png`, ...more });
  const fileRejects = (sources: Record<string, unknown>, issue: string) =>
    assert.throws(
      () => parseSourcesFile({ sources }),
      (e: unknown) => e instanceof ConfigError && e.issues.includes(issue),
    );

  test('a source lists other sources of its file as mirrors, in order', () => {
    const f = parseSourcesFile({
      sources: {
        osm: tile('a.example', { mirrors: ['osm-b', 'osm-c'] }),
        'osm-b': tile('b.example'),
        'osm-c': { type: 'wms', url: 'http://c.example/wms', layers: ['osm'] },
      },
    });
    assert.deepEqual(f.sources.osm?.mirrors, ['osm-b', 'osm-c']);
    assert.equal(f.sources['osm-b']?.mirrors, undefined);
  });

  test('each mirror is a source name, listed once, at most 4', () => {
    rejects(tile('a.example', { mirrors: ['../b'] }), 'mirrors.0', '(got "../b")');
    rejects(tile('a.example', { mirrors: ['b', 'c', 'b'] }), 'mirrors.2', 'repeats mirrors.0 (got "b")');
    rejects(tile('a.example', { mirrors: ['b', 'c', 'd', 'e', 'f'] }), 'mirrors', 'at most 4');
    rejects(tile('a.example', { mirrors: 'b' }), 'mirrors', '(got "b")');
  });

  test('a mirror names another source of the same file, itself without mirrors', () => {
    fileRejects(
      { osm: tile('a.example', { mirrors: ['osm2'] }) },
      'sources.osm.mirrors.0: is not a source of this file (got "osm2")',
    );
    // An inherited property is no source.
    fileRejects(
      { osm: tile('a.example', { mirrors: ['constructor'] }) },
      'sources.osm.mirrors.0: is not a source of this file (got "constructor")',
    );
    fileRejects(
      { osm: tile('a.example', { mirrors: ['osm'] }) },
      'sources.osm.mirrors.0: is this source itself (got "osm")',
    );
    fileRejects(
      { osm: tile('a.example', { mirrors: ['b'] }), b: tile('b.example', { mirrors: ['c'] }), c: tile('c.example') },
      'sources.osm.mirrors.0: has mirrors of its own: mirror chains are one level deep (got "b")',
    );
    // Two sources mirroring each other is a chain too, reported on both.
    assert.throws(
      () =>
        parseSourcesFile(
          { sources: { a: tile('a.example', { mirrors: ['b'] }), b: tile('b.example', { mirrors: ['a'] }) } },
          'sources file s.yaml',
          true,
        ),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.issues.length === 2 &&
        /^sources file s\.yaml: sources\.a\.mirrors\.0: has mirrors of its own/.test(e.message),
    );
  });

  test('a WMS mirror in another CRS is refused by the schema already: sources are Web Mercator', () => {
    rejects({ type: 'wms', url: 'http://w.example/wms', layers: ['a'], crs: 'EPSG:4326' }, 'crs', '(got "EPSG:4326")');
  });
});

describe('request URLs', () => {
  test('xyz and tms differ in row order; subdomains rotate', () => {
    const xyz = parseSource({ type: 'xyz', url: 'https://{s}.t.example/{z}/{x}/{y}.png', subdomains: ['a', 'b', 'c'] });
    assert.equal(tileUrl(xyz, { z: 10, x: 518, y: 352 }), 'https://a.t.example/10/518/352.png'); // (518 + 352) % 3 = 0
    assert.equal(tileUrl(xyz, { z: 10, x: 519, y: 352 }), 'https://b.t.example/10/519/352.png');
    const tms = parseSource({ type: 'tms', url: 'https://t.example/tms/{z}/{x}/{y}.png' });
    assert.equal(tileUrl(tms, { z: 10, x: 518, y: 352 }), 'https://t.example/tms/10/518/671.png');
  });

  test('WMTS REST and KVP GetTile', () => {
    const rest = parseSource({
      type: 'wmts-rest',
      url: 'https://w.example/wmts/roads/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}.png',
    });
    assert.equal(
      tileUrl(rest, { z: 3, x: 4, y: 2 }),
      'https://w.example/wmts/roads/default/GoogleMapsCompatible/3/2/4.png',
    );
    const kvp = parseSource({
      type: 'wmts-kvp',
      url: 'https://w.example/gwc/service/wmts?token=public',
      layer: 'roads',
      tileMatrixSet: 'EPSG:3857',
      tileMatrixPrefix: 'EPSG:3857:',
    });
    const u = new URL(tileUrl(kvp, { z: 3, x: 4, y: 2 }));
    assert.equal(u.searchParams.get('token'), 'public');
    assert.deepEqual(
      ['SERVICE', 'REQUEST', 'LAYER', 'TILEMATRIXSET', 'TILEMATRIX', 'TILEROW', 'TILECOL', 'FORMAT'].map((k) =>
        u.searchParams.get(k),
      ),
      ['WMTS', 'GetTile', 'roads', 'EPSG:3857', 'EPSG:3857:3', '2', '4', 'image/png'],
    );
  });

  test('WMS GetMap: SRS in 1.1.1, CRS in 1.3.0, EPSG:3857 bbox easting first in both', () => {
    const base = {
      type: 'wms',
      url: 'http://w.example/cgi-bin/mapserv?map=/data/x.map',
      layers: ['roads', 'labels'],
    } as const;
    const b = tileBounds(1, 1, 0);
    for (const version of ['1.1.1', '1.3.0'] as const) {
      const s = parseSource({ ...base, version });
      if (s.type !== 'wms') throw new Error('wms');
      const u = new URL(getMapUrl(s, b, 256, 256));
      assert.equal(u.searchParams.get('map'), '/data/x.map');
      assert.equal(u.searchParams.get(version === '1.3.0' ? 'CRS' : 'SRS'), 'EPSG:3857');
      assert.equal(u.searchParams.get(version === '1.3.0' ? 'SRS' : 'CRS'), null);
      assert.equal(u.searchParams.get('BBOX'), '0,0,20037508.342789,20037508.342789');
      assert.equal(u.searchParams.get('LAYERS'), 'roads,labels');
      assert.equal(u.searchParams.get('WIDTH'), '256');
    }
  });

  test('geographic bboxes put latitude first only for EPSG:4326 in WMS 1.3.0', () => {
    const box = { west: 5, south: 45, east: 6, north: 46 };
    assert.equal(geographicBbox('1.3.0', 'EPSG:4326', box), '45,5,46,6');
    assert.equal(geographicBbox('1.1.1', 'EPSG:4326', box), '5,45,6,46');
    assert.equal(geographicBbox('1.3.0', 'CRS:84', box), '5,45,6,46');
  });
});
