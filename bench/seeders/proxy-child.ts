/**
 * The counting HTTP proxy of bench:seeders, in its own process so it shares no event loop with the seeder
 * being measured: listens on 127.0.0.1 and forwards every request as is to the upstream (lighttpd), counting
 * requests, requests in flight (arrival to the end of the response) and their peak, bytes sent back, the
 * GetMap sizes asked for, and answers that are not images (MapServer reports WMS errors as XML with 200).
 * argv[2]: upstream origin (http://127.0.0.1:<port>); argv[3]: lighttpd's pid, whose CGI children (one mapserv
 * per request) it samples every 10 ms for the peak number running at once. Prints its port on stdout; IPC:
 * 'reset' and 'stats'.
 */
import { readFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

const upstream = new URL(process.argv[2]!);
const agent = new Agent({ keepAlive: true, maxSockets: Infinity });

export interface ProxyStats {
  requests: number;
  getMap: number;
  other: number;
  notImage: number;
  failed: number;
  peakInFlight: number;
  bytesOut: number;
  /** "WIDTHxHEIGHT" of the GetMap requests -> count. */
  sizes: Record<string, number>;
  /** A few query strings (the first GetMaps), to show what each tool asks for. */
  samples: string[];
  /** Every GetMap query string (to re-issue a tool's own request when its tiles differ). */
  queries: string[];
  /** ms (performance.now() of this process) of the first request and the last response end; 0 when none. */
  firstStart: number;
  lastEnd: number;
  /** Outstanding requests when the stats were read (should be 0 after a tool exits). */
  inFlight: number;
  /** Most mapserv processes seen running at once under lighttpd (sampled every 10 ms); -1 if not readable. */
  peakMapserv: number;
}

let s: ProxyStats;
const reset = () => {
  s = {
    requests: 0,
    getMap: 0,
    other: 0,
    notImage: 0,
    failed: 0,
    peakInFlight: 0,
    bytesOut: 0,
    sizes: {},
    samples: [],
    queries: [],
    firstStart: 0,
    lastEnd: 0,
    inFlight: 0,
    peakMapserv: 0,
  };
};
reset();

const server = createServer((req, res) => {
  const stats = s;
  stats.requests++;
  if (!stats.firstStart) stats.firstStart = performance.now();
  stats.inFlight++;
  if (stats.inFlight > stats.peakInFlight) stats.peakInFlight = stats.inFlight;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    stats.inFlight--;
    stats.lastEnd = performance.now();
  };
  res.once('finish', finish);
  res.once('close', finish);
  const url = req.url ?? '/';
  const q = new URLSearchParams(url.split('?')[1] ?? '');
  const param = (k: string) => {
    for (const [key, v] of q) if (key.toUpperCase() === k) return v;
    return undefined;
  };
  if (param('REQUEST')?.toUpperCase() === 'GETMAP') {
    stats.getMap++;
    const size = `${param('WIDTH')}x${param('HEIGHT')}`;
    stats.sizes[size] = (stats.sizes[size] ?? 0) + 1;
    const query = url.split('?')[1] ?? '';
    if (stats.samples.length < 2) stats.samples.push(query);
    stats.queries.push(query);
  } else stats.other++;
  const up = request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: url,
      headers: { ...req.headers, host: upstream.host },
      agent,
    },
    (ur) => {
      if (!String(ur.headers['content-type'] ?? '').startsWith('image/')) stats.notImage++;
      if ((ur.statusCode ?? 500) >= 400) stats.failed++;
      ur.on('data', (d: Buffer) => (stats.bytesOut += d.length));
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    },
  );
  up.on('error', (err) => {
    stats.failed++;
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`proxy: ${err.message}`);
  });
  req.pipe(up);
});
const serverPid = Number(process.argv[3]);
if (serverPid) {
  const children = `/proc/${serverPid}/task/${serverPid}/children`;
  setInterval(() => {
    try {
      // Children not yet reaped (zombies: the answer is out, lighttpd has not waited yet) do not count.
      let n = 0;
      for (const pid of readFileSync(children, 'utf8').trim().split(/\s+/).filter(Boolean)) {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
          if (stat[stat.lastIndexOf(')') + 2] !== 'Z') n++;
        } catch {
          /* gone */
        }
      }
      if (n > s.peakMapserv) s.peakMapserv = n;
    } catch {
      s.peakMapserv = -1;
    }
  }, 10).unref();
}

server.keepAliveTimeout = 60_000;
server.headersTimeout = 120_000;
server.requestTimeout = 0;

process.on('message', (m: string) => {
  if (m === 'reset') {
    reset();
    process.send!({ type: 'reset' });
  } else if (m === 'stats') process.send!({ type: 'stats', stats: s });
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
