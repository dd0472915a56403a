import type { Command } from 'commander';
import { METRICS_ADDR_ENV } from '../../client/telemetry';
import { portOption } from '../port-option';
import type { demoMosaic as DemoMosaic } from '../demo-mosaic';
import type { Runners, TemporalContext } from '../runners';

/** `demo`'s options, as commander parses them. */
interface DemoOptions {
  out: string;
  json?: boolean;
  metricsAddr?: string;
  consolePort?: number;
  console: boolean;
  keepConsole?: boolean;
}

/** `tilebreaker demo` (npm start): src/cli/demo-mosaic.ts runs the mosaic, with the console beside it. */
export function registerDemoCommand(program: Command, run: Runners): void {
  program
    .command('demo')
    .description(
      'the main job (npm start): a real mosaic from a bundled tile server that fails mid-run, on an embedded Temporal dev server',
    )
    .option('--out <dir>', 'where the mosaic, manifest and mask go', 'out/demo')
    .option(
      '--json',
      'print one JSON object at the end (result, breaker transitions, what the tile server saw); progress goes to stderr',
    )
    .option(
      '--metrics-addr <ip:port>',
      `serve Prometheus metrics at http://IP:PORT/metrics while the demo runs (default ${METRICS_ADDR_ENV}; npm start: 127.0.0.1:9464); a port that is taken is replaced by a free one, and the address used is printed`,
    )
    .option(
      '--console-port <n>',
      'serve the console on this port of 127.0.0.1 (default 8484, or a free one when that is taken)',
      portOption('--console-port'),
    )
    .option('--no-console', 'do not serve the console')
    .option(
      '--keep-console',
      'keep the console (and the embedded Temporal server) up after the demo, until Ctrl-C (the default in a terminal)',
    )
    .option(
      '--no-keep-console',
      'stop when the demo ends (the default when the output is not a terminal, or with --json)',
    )
    .action(async (o: DemoOptions) => {
      const { demoMosaic, DEMO_BREAKER } = await import('../demo-mosaic.js');
      await run.withTemporal((ctx) => runDemo(ctx, o, demoMosaic), {
        breaker: DEMO_BREAKER,
        metrics: { flag: o.metricsAddr, fromEnv: true, anyPortIfTaken: true },
      });
    });
}

/** The demo on a client and worker: the console served beside the mosaic, kept up after it when asked. */
async function runDemo(
  { client, taskQueue, address, metricsAt }: TemporalContext,
  o: DemoOptions,
  demoMosaic: typeof DemoMosaic,
): Promise<void> {
  const port = o.consolePort;
  if (!o.json) console.log(`tilebreaker demo: Temporal at ${address}, worker on task queue ${taskQueue}`);
  if (metricsAt) console.error(`tilebreaker demo: metrics at ${metricsAt}`);
  // Loaded only when served: --no-console runs the demo without the page's modules.
  const consoleModule = o.console ? await import('../console-command.js') : null;
  const web = consoleModule
    ? await consoleModule.serveConsole(client, taskQueue, port !== undefined ? { port } : {})
    : null;
  if (web) console.error(`tilebreaker demo: console at ${web.url} (read-only)`);
  try {
    process.exitCode = await demoMosaic(client, taskQueue, o.out, { json: !!o.json });
    // In a terminal someone is there to look at the page; a script or CI wants the demo to end.
    const keep = o.keepConsole ?? (!!process.stdout.isTTY && !o.json);
    if (web && keep) {
      console.error(`tilebreaker demo: done; the console stays up at ${web.url} until Ctrl-C`);
      await consoleModule!.untilInterrupted();
    } else if (web && !o.json)
      console.log('(the console closed with the demo: `npm start -- --keep-console` keeps it up)');
  } finally {
    await web?.close();
  }
}
