import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A tiny real HTTP endpoint on 127.0.0.1 whose answer a test can change, counting requests. */
export interface TestEndpoint {
  url: string;
  port: number;
  requests: number;
  /** Status code to answer with (200 answers a 1x1 PNG). */
  status: number;
  close(): Promise<void>;
}

// A valid 1x1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

export async function startTestEndpoint(status = 200): Promise<TestEndpoint> {
  const endpoint = { url: '', port: 0, requests: 0, status, close: async () => {} };
  const server: Server = createServer((req, res) => {
    endpoint.requests++;
    if (endpoint.status === 200) res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    else res.writeHead(endpoint.status, { 'content-type': 'text/plain' }).end(`status ${endpoint.status}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint.port = (server.address() as AddressInfo).port;
  endpoint.url = `http://127.0.0.1:${endpoint.port}`;
  endpoint.close = () => new Promise((resolve) => server.close(() => resolve()));
  return endpoint;
}
