import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { breakerKey, breakerWorkflowId, type TransitionRecord } from '../breaker';
import { planMosaic } from '../activities/mosaic/plan';
import { startMosaic } from '../client/mosaics';
import { startDemoTileServer, type DemoTileServer } from '../demo/tile-server';
import { transitionsQuery } from '../messages/breaker';
import type { MosaicRequest, MosaicResult } from '../messages/mosaic-types';
import { showMosaicProgress } from './mosaic/progress';
import { summaryLine } from './mosaic/result';

/** The demo's breaker: trips on a handful of failures and cools down in seconds, so a short outage shows the whole cycle. */
export const DEMO_BREAKER = { config: { minSamples: 6, cooldownMs: 4_000, cooldownMaxFactor: 2, rampMs: 3_000 } };

/** A demo mosaic that ran to its result, with what its breaker and the tile server saw. */
interface DemoRun {
  workflowId: string;
  /** When it started (ms since the epoch). */
  started: number;
  result: MosaicResult;
  key: string;
  /** Oldest first. */
  transitions: TransitionRecord[];
  server: DemoTileServer;
}

/**
 * The main job: a real mosaic of the Alps at zoom 10 (29 x 26 = 754 tiles) from the bundled demo tile server,
 * which goes down for 12 s after a third of the tiles. Fallback `wait`: refused tiles wait on durable timers
 * for the breaker, so the mosaic still ends whole; the summary shows what the outage cost the server.
 */
export async function demoMosaic(
  client: Client,
  taskQueue: string,
  outDir: string,
  opts: { json?: boolean } = {},
): Promise<number> {
  // With --json, stdout carries one JSON object at the end; the progress and the story go to stderr.
  const say = opts.json ? (line: string) => console.error(line) : (line: string) => console.log(line);
  const server = await startDemoTileServer({ latencyMs: 60 });
  try {
    mkdirSync(outDir, { recursive: true });
    const request = demoRequest(server.template, outDir);
    const { total } = await planMosaic(request);
    // The renderer falls over a third of the way through, for 12 s.
    server.scheduleOutage(Math.round(total / 3), 12_000);
    const started = Date.now();
    const handle = await startMosaic(
      client,
      taskQueue,
      request,
      `mosaic/demo-${new Date().toISOString().replace(/[:.]/g, '-')}`,
    );
    say(`mosaic ${handle.workflowId}: ${request.bbox!.join(',')} at zoom ${request.zoom} from ${server.template}`);
    say(`${total} tiles; the demo tile server goes down for 12 s after ${Math.round(total / 3)} requests\n`);
    const status = await showMosaicProgress(client, handle.workflowId, {
      stream: opts.json ? process.stderr : process.stdout,
    });
    if (!status.result) {
      if (opts.json)
        console.log(
          JSON.stringify({ workflowId: handle.workflowId, status: status.status, failure: status.failure }, null, 2),
        );
      else console.log(`mosaic ended ${status.status}: ${status.failure ?? ''}`);
      return 1;
    }
    const key = breakerKey(server.url);
    const transitions = await client.workflow
      .getHandle(breakerWorkflowId(key))
      .query(transitionsQuery, 50)
      .catch(() => []);
    const run = { workflowId: handle.workflowId, started, result: status.result, key, server };
    (opts.json ? printDemoJson : printDemoStory)({ ...run, transitions: [...transitions].reverse() });
    return 0;
  } finally {
    await server.close();
  }
}

/** The demo's request: the Alps at zoom 10 from the demo tile server, waiting out its outage. */
function demoRequest(template: string, outDir: string): MosaicRequest {
  return {
    source: { type: 'xyz', url: template, concurrency: 4 },
    sourceName: 'demo',
    bbox: [5.0, 44.0, 15.0, 50.0],
    zoom: 10,
    output: path.join(outDir, 'alps-z10.tif'),
    extraFormats: ['png'],
    fallback: 'wait',
    deadline: '5m',
    afterDeadline: 'hole',
    batchSize: 32,
    parallelBatches: 2,
  };
}

/** `demo --json`: one object on stdout, the result with the breaker's transitions and the tile server's counts. */
function printDemoJson({ workflowId, started, result, key, transitions, server }: DemoRun): void {
  const seconds = (Date.now() - started) / 1000;
  const doc = {
    workflowId,
    seconds,
    result,
    breaker: { key, transitions },
    tileServer: {
      requests: server.stats.requests,
      whileDown: server.stats.whileDown,
      outages: server.stats.outages,
    },
  };
  console.log(JSON.stringify(doc, null, 2));
}

/** The demo's story: the result, the breaker's transitions and the outages, from the start, and the files. */
function printDemoStory({ started, result: r, key, transitions, server }: DemoRun): void {
  const t0 = started;
  const rel = (t: number) => `+${((t - t0) / 1000).toFixed(1)}s`;
  console.log(`\nresult: ${summaryLine(r)} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`breaker ${key}:`);
  for (const t of transitions) console.log(`  ${rel(t.at)}  ${t.from} -> ${t.to}  ${t.reason}: ${t.detail}`);
  for (const o of server.stats.outages)
    console.log(`tile server down ${rel(o.startedAt)} .. ${o.endedAt ? rel(o.endedAt) : 'still'}`);
  console.log(
    `requests the tile server received: ${server.stats.requests} in all, ${server.stats.whileDown} while it was down`,
  );
  console.log('files:');
  for (const f of r.files) console.log(`  ${path.relative(process.cwd(), f)}`);
}
