import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { blankImage, gradientImage } from './images';

/**
 * A fault-injecting tile server on 127.0.0.1: every row of the outcome classification by path.
 *   /ok/{z}/{x}/{y}.png  /etag/... (ETag "v1", 304 to If-None-Match "v1")  /ok-jpeg/...  /blank/...  /wrong-size/...  /truncated-png/...  /truncated-jpeg/...
 *   /se-111 (200, WMS 1.1.1 ServiceExceptionReport, no code)  /se-130-layer (200, 1.3.0, LayerNotDefined)
 *   /ows-exception (200, OWS ExceptionReport, TileOutOfRange)  /se-500 (500 with a ServiceException)
 *   /html (200 HTML error page)  /empty (200, no body)  /json (200 JSON)  /status/{code}[?retryAfter=s]
 *   /slow-drip (a byte every 300 ms)  /slow-headers (answers after 3 s)  /oversize (9 MiB)  /reset (cut mid-body)
 *   /inimage (200, an image with an error drawn in it: indistinguishable from a tile)
 */
export interface FaultServer {
  url: string;
  requests: number;
  close(): Promise<void>;
}

const SE_111 = `<?xml version="1.0" encoding="ISO-8859-1" standalone="no" ?>
<!DOCTYPE ServiceExceptionReport SYSTEM "http://schemas.opengis.net/wms/1.1.1/exception_1_1_1.dtd">
<ServiceExceptionReport version="1.1.1">
<ServiceException>
msDrawMap(): Image handling error. Failed to draw layer named 'roads'.
</ServiceException>
</ServiceExceptionReport>`;

const SE_130_LAYER = `<?xml version="1.0" encoding="UTF-8"?>
<ServiceExceptionReport version="1.3.0" xmlns="http://www.opengis.net/ogc" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <ServiceException code="LayerNotDefined">msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter. A layer might be disabled for this request.</ServiceException>
</ServiceExceptionReport>`;

const OWS = `<?xml version="1.0" encoding="UTF-8"?>
<ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows/1.1" version="1.1.0">
  <ows:Exception exceptionCode="TileOutOfRange" locator="TILEROW"><ows:ExceptionText>Row 99 is out of range</ows:ExceptionText></ows:Exception>
</ows:ExceptionReport>`;

export async function startFaultServer(tileSize = 256): Promise<FaultServer> {
  const png = await gradientImage(tileSize, tileSize, 'png');
  const jpeg = await gradientImage(tileSize, tileSize, 'jpeg');
  const blank = await blankImage(tileSize, tileSize);
  const big = await gradientImage(tileSize * 2, tileSize * 2, 'png');
  const inimage = await gradientImage(tileSize, tileSize, 'png', 99);
  const sockets = new Set<import('node:net').Socket>();
  const state = { url: '', requests: 0, close: async () => {} };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    state.requests++;
    const u = new URL(req.url ?? '/', 'http://x');
    const [, route, arg] = u.pathname.split('/');
    const send = (status: number, type: string, body: Buffer | string) =>
      res.writeHead(status, { 'content-type': type }).end(body);
    switch (route) {
      case 'ok':
        return send(200, 'image/png', png);
      case 'keyed':
        // Needs ?api_key=s3cret (a query-string credential).
        if (u.searchParams.get('api_key') !== 's3cret') return send(403, 'text/plain', 'bad key');
        return send(200, 'image/png', png);
      case 'keyed-down':
        return send(503, 'text/plain', 'down');
      case 'etag':
        // A tile with a validator: a conditional request for the same version gets 304.
        if (req.headers['if-none-match'] === '"v1"') return res.writeHead(304, { etag: '"v1"' }).end();
        return res
          .writeHead(200, {
            'content-type': 'image/png',
            etag: '"v1"',
            'last-modified': 'Sun, 01 Nov 2026 00:00:00 GMT',
          })
          .end(png);
      case 'ok-jpeg':
        return send(200, 'image/jpeg', jpeg);
      case 'blank':
        return send(200, 'image/png', blank);
      case 'wrong-size':
        return send(200, 'image/png', big);
      case 'truncated-png':
        return send(200, 'image/png', png.subarray(0, Math.floor(png.length / 2)));
      case 'truncated-jpeg':
        return send(200, 'image/jpeg', jpeg.subarray(0, Math.floor(jpeg.length / 2)));
      case 'se-111':
        return send(200, 'application/vnd.ogc.se_xml', SE_111);
      case 'se-130-layer':
        return send(200, 'text/xml', SE_130_LAYER);
      case 'ows-exception':
        return send(200, 'application/xml', OWS);
      case 'se-500':
        return send(500, 'application/vnd.ogc.se_xml', SE_111);
      case 'html':
        return send(
          200,
          'text/html',
          '<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>upstream down</body></html>',
        );
      case 'empty':
        return send(200, 'image/png', Buffer.alloc(0));
      case 'json':
        return send(200, 'application/json', '{"error":"quota"}');
      case 'inimage':
        return send(200, 'image/png', inimage);
      case 'status': {
        const code = Number(arg);
        const headers: Record<string, string> = { 'content-type': 'text/plain' };
        if (u.searchParams.has('retryAfter')) headers['retry-after'] = u.searchParams.get('retryAfter')!;
        if (code === 204) return res.writeHead(204).end();
        return res.writeHead(code, headers).end(`status ${code}`);
      }
      case 'slow-drip': {
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(png.length) });
        let i = 0;
        const t = setInterval(() => {
          if (res.destroyed || i >= png.length) return clearInterval(t);
          res.write(png.subarray(i, i + 1));
          i++;
        }, 300);
        res.on('close', () => clearInterval(t));
        return;
      }
      case 'slow-headers': {
        const t = setTimeout(() => send(200, 'image/png', png), 3_000);
        res.on('close', () => clearTimeout(t));
        return;
      }
      case 'oversize':
        return send(200, 'image/png', Buffer.alloc(9 * 1024 * 1024, 7));
      case 'reset':
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(png.length) });
        res.write(png.subarray(0, 100));
        return setTimeout(() => req.socket.destroy(), 20);
      default:
        return send(404, 'text/plain', 'no such route');
    }
  };
  const server: Server = createServer(handle);
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return state;
}

/** A loopback port with nothing listening: connections are refused. */
export async function refusedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}
