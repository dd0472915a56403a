import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { now } from './clock';
import { SERVER_PHASES, type OutageKind, type Schedule, type ServerPhase, type ServerStats } from './types';

export interface OutageServerOptions {
  tile: Buffer;
  /** Mean render time of a healthy tile; each request takes uniform [0.5, 1.5] x this. */
  tileLatencyMs: number;
}

export interface OutagePlan {
  healthyMs: number;
  outageMs: number;
  recoveryMs: number;
  kind: OutageKind;
  retryAfterSec: number | null;
}

const TILE_PATH = /^\/\d+\/\d+\/\d+\.png(?:\?.*)?$/;

/**
 * The outage tile server: serves a PNG for any /{z}/{x}/{y}.png on 127.0.0.1, then, on a schedule relative to
 * `start()`, fails (every request answered 503, the listening socket closed so connections are refused, or
 * every request accepted and never answered until the outage ends, when the held connections are dropped),
 * then recovers. It counts every request it receives per phase, per `x-sim-mode` and per `x-sim-worker`, the
 * most requests in flight at once, and keeps each request's arrival and finish time so any window's
 * in-flight peak can be computed afterwards.
 *
 * Refused connections never reach this handler: the workers count attempts client-side as well.
 */
export class OutageTileServer {
  private readonly server: http.Server;
  private port = 0;
  private phase: ServerPhase = 'before';
  private schedule: Schedule | null = null;
  private plan: OutagePlan | null = null;
  private readonly timers: NodeJS.Timeout[] = [];
  private inFlight = 0;
  private readonly byPhase = Object.fromEntries(SERVER_PHASES.map((p) => [p, 0])) as Record<ServerPhase, number>;
  private readonly peak = Object.fromEntries([...SERVER_PHASES, 'overall'].map((p) => [p, 0])) as Record<
    ServerPhase | 'overall',
    number
  >;
  private readonly byMode: Record<string, number> = {};
  private readonly byWorker: Record<string, number> = {};
  private readonly requests: Array<[number, number, number, number]> = [];
  private listenerClosedAt: number | null = null;
  private listenerReopenedAt: number | null = null;
  /** Requests held unanswered by a hang outage, dropped when it ends. */
  private readonly hung = new Set<http.ServerResponse>();

  constructor(private readonly opts: OutageServerOptions) {
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.keepAliveTimeout = 30_000;
  }

  /** Listens on 127.0.0.1 on an ephemeral port; returns the port. */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  /** The start signal: healthy now, the outage after plan.healthyMs, recovered after plan.outageMs more. */
  start(plan: OutagePlan): Schedule {
    if (this.schedule) throw new Error('outage server: start() called twice; a schedule runs once per server');
    const startAt = now();
    this.plan = plan;
    this.schedule = {
      startAt,
      outageAt: startAt + plan.healthyMs,
      recoverAt: startAt + plan.healthyMs + plan.outageMs,
      endAt: startAt + plan.healthyMs + plan.outageMs + plan.recoveryMs,
    };
    this.phase = 'healthy';
    this.at(this.schedule.outageAt, () => this.beginOutage());
    this.at(this.schedule.recoverAt, () => this.recover());
    this.at(this.schedule.endAt, () => this.setPhase('after', 'endAt'));
    return { ...this.schedule };
  }

  stats(): ServerStats {
    if (!this.schedule) throw new Error('outage server: stats() before start()');
    return {
      port: this.port,
      schedule: { ...this.schedule },
      byPhase: { ...this.byPhase },
      byMode: { ...this.byMode },
      byWorker: { ...this.byWorker },
      peakInFlight: { ...this.peak },
      requests: this.requests,
      listenerClosedAt: this.listenerClosedAt,
      listenerReopenedAt: this.listenerReopenedAt,
    };
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.server.closeAllConnections();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private at(when: number, fn: () => void): void {
    this.timers.push(setTimeout(fn, Math.max(0, when - now())));
  }

  /** Records the time the phase actually switched, so the schedule reports what happened, not what was planned. */
  private setPhase(phase: ServerPhase, field: keyof Schedule): void {
    this.phase = phase;
    if (this.schedule) this.schedule[field] = now();
  }

  private beginOutage(): void {
    this.setPhase('outage', 'outageAt');
    if (this.plan?.kind !== 'refused') return;
    // Stop accepting (the kernel now refuses connections to the port) and drop the kept-alive ones, which
    // would otherwise keep carrying requests.
    this.listenerClosedAt = now();
    this.server.close();
    this.server.closeAllConnections();
  }

  private recover(): void {
    this.setPhase('recovered', 'recoverAt');
    // A hang ends as a stalled proxy or renderer does when it comes back: the held connections are dropped.
    for (const res of this.hung) res.destroy();
    this.hung.clear();
    if (this.plan?.kind !== 'refused') return;
    this.server.listen(this.port, '127.0.0.1', () => {
      this.listenerReopenedAt = now();
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const arrivedAt = now();
    const phase = this.phase;
    const phaseIndex = SERVER_PHASES.indexOf(phase);
    const mode = header(req, 'x-sim-mode') ?? 'unlabelled';
    const workerText = header(req, 'x-sim-worker');
    const worker = workerText !== undefined && /^\d+$/.test(workerText) ? Number(workerText) : -1;
    this.byPhase[phase]++;
    this.byMode[mode] = (this.byMode[mode] ?? 0) + 1;
    if (worker >= 0) this.byWorker[worker] = (this.byWorker[worker] ?? 0) + 1;
    this.inFlight++;
    this.peak.overall = Math.max(this.peak.overall, this.inFlight);
    this.peak[phase] = Math.max(this.peak[phase], this.inFlight);
    const record: [number, number, number, number] = [arrivedAt, Number.NaN, worker, phaseIndex];
    this.requests.push(record);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.inFlight--;
      record[1] = now();
    };
    res.on('close', finish);

    if (req.method !== 'GET' || !TILE_PATH.test(req.url ?? '')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such tile\n');
      return;
    }
    if (phase === 'outage' && this.plan?.kind === 'hang') {
      // Accepted and never answered, until the outage ends.
      this.hung.add(res);
      res.on('close', () => this.hung.delete(res));
      return;
    }
    if (phase === 'outage') {
      // Only the 503 kind gets here during the outage (the refused kind has no listener).
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'text/plain' };
      if (this.plan?.retryAfterSec != null) headers['retry-after'] = String(this.plan.retryAfterSec);
      res.writeHead(503, headers).end('renderer unavailable\n');
      return;
    }
    const latency = this.opts.tileLatencyMs * (0.5 + Math.random());
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': this.opts.tile.length }).end(this.opts.tile);
    }, latency);
  }
}

function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
