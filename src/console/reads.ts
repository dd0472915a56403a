import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { sendFile, sendJson } from './replies';
import type { ConsoleSite } from './site';

/** The page and its script: files in the package (its `files` list), beside the compiled code's source. */
const STATIC_DIR = path.resolve(__dirname, '../../../src/console/static');
const STATIC: Record<string, string> = {
  '/': 'index.html',
  '/console.js': 'console.js',
  '/console.css': 'console.css',
};
/** The map library, served from the installed package (no internet): only these files. */
const leafletDir = () => path.dirname(require.resolve('leaflet/dist/leaflet.js'));
const VENDOR: Record<string, string> = {
  '/vendor/leaflet.js': 'leaflet.js',
  '/vendor/leaflet.css': 'leaflet.css',
  '/vendor/images/marker-icon.png': 'images/marker-icon.png',
  '/vendor/images/marker-shadow.png': 'images/marker-shadow.png',
  '/vendor/images/layers.png': 'images/layers.png',
};

/** A GET: the page's files, the map library's, and the page's data (overview, a mosaic, its tiles and preview). */
export async function serveRead(
  site: ConsoleSite,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
): Promise<void> {
  if (STATIC[route]) return sendFile(res, path.join(STATIC_DIR, STATIC[route]));
  if (VENDOR[route]) return sendFile(res, path.join(leafletDir(), VENDOR[route]));
  // The page's reads come from the page: another site's <img> or script cannot make the console read a
  // manifest or decode an image (browsers send Sec-Fetch-Site; a tool without it is not a browser).
  const fetchSite = req.headers['sec-fetch-site'];
  if (fetchSite !== undefined && fetchSite !== 'same-origin' && fetchSite !== 'none')
    return sendJson(res, 403, { error: "the console's data is for its own page" });
  if (route === '/api/overview') return sendJson(res, 200, await site.overview.read());
  const m = /^\/api\/mosaics\/([^/]+)(?:\/(tiles\/(\d+)|preview\.png))?$/.exec(route);
  if (m) return serveMosaic(site, res, decodeURIComponent(m[1]!), m[2], m[3]);
  return sendJson(res, 404, { error: `nothing at ${route}` });
}

/** A mosaic's detail, one of its tiles (`tile`: the tile's index), or its preview image (`part`: preview.png). */
async function serveMosaic(
  site: ConsoleSite,
  res: ServerResponse,
  id: string,
  part: string | undefined,
  tile: string | undefined,
): Promise<void> {
  if (tile !== undefined) return sendJson(res, 200, await site.mosaics.tile(id, Number(tile)));
  if (part === 'preview.png') {
    const png = await site.mosaics.preview(id);
    res.writeHead(200, {
      'content-type': 'image/png',
      'cache-control': 'no-store',
      'cross-origin-resource-policy': 'same-origin',
    });
    res.end(png);
    return;
  }
  return sendJson(res, 200, await site.mosaics.detail(id));
}
