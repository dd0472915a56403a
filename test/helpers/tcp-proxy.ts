import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a server (a Temporal frontend: gRPC over HTTP/2), for outages a client
 * cannot tell from a real one: `hang` drops the connections it forwards and then accepts new ones without
 * forwarding a byte (a server that does not answer: every call runs into its deadline); `pass` drops the held
 * connections and forwards again.
 */
export class TcpProxy {
  private mode: 'pass' | 'hang' = 'pass';
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly address: string,
  ) {}

  static async start(upstream: string): Promise<TcpProxy> {
    const at = upstream.lastIndexOf(':');
    const host = upstream.slice(0, at) === 'localhost' ? '127.0.0.1' : upstream.slice(0, at);
    const port = Number(upstream.slice(at + 1));
    // Nobody knows the port before listen() returns, so no connection comes before `proxy` is set.
    const server = createServer((client) => proxy.accept(client, host, port));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new TcpProxy(server, `127.0.0.1:${(server.address() as AddressInfo).port}`);
    return proxy;
  }

  /** Stop answering: every connection now is dropped, later ones are held silent. */
  hang(): void {
    this.mode = 'hang';
    this.dropAll();
  }

  /** Answer again: held connections are dropped (the client reconnects), new ones forwarded. */
  pass(): void {
    this.mode = 'pass';
    this.dropAll();
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, host: string, port: number): void {
    this.track(client);
    if (this.mode === 'hang') return;
    const upstream = connect(port, host);
    this.track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.on('error', () => s.destroy());
    s.on('close', () => this.sockets.delete(s));
  }

  private dropAll(): void {
    for (const s of this.sockets) s.destroy();
  }
}
