#!/usr/bin/env node
/**
 * Issue 3's outage benchmark (`npm run bench:outage`): one local tile server schedule (healthy -> outage ->
 * recovered) per mode, 60 simulated workers fetching tiles back to back through
 *   shared       tilebreaker's BreakerGuard + breaker entity on a real Temporal dev server,
 *   per-process  one cockatiel breaker per simulated worker,
 *   retry-only   the retry policy alone,
 * one mode at a time, then one table per mode and the `outage: ...` line.
 */
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { Command, InvalidArgumentError, Option } from 'commander';
import { writeFileSync } from 'node:fs';
import { now } from './outage/clock';
import { makeModeContext, type ModeContext } from './outage/fleet';
import { entityTaskLine } from './outage/entity-tasks';
import { FLAKY_RECOVERY_DEFAULTS, flakyRecoveryLine, runFlakyRecoveryScenario } from './outage/flaky-recovery';
import { loadLine, runLoadScenario } from './outage/load';
import { computeFigures, type ModeFigures } from './outage/metrics';
import { peakDump } from './outage/peak-dump';
import { cockatielBreakerOptions, PER_PROCESS_DIFFERENCES, runPerProcessMode } from './outage/per-process';
import { ModeRecorder } from './outage/recorder';
import { DEFINITIONS, finalFigures, finalLine, modeTable, targetLines } from './outage/report';
import { runPoisonedScenario } from './outage/poisoned';
import { mirrorLine, outageSpread, runMirrorScenario } from './outage/mirror';
import { runRetryOnlyMode } from './outage/retry-only';
import { OutageServerProcess } from './outage/server-client';
import { runSharedMode, sharedPolicyConfig, type SharedModeExtras } from './outage/shared-mode';
import { MODES, OUTAGE_KINDS, type ModeName, type OutageKind, type Scenario } from './outage/types';

function num(min: number, integer = false) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
      throw new InvalidArgumentError(
        `expected ${integer ? 'an integer' : 'a number'} >= ${min} (got ${JSON.stringify(value)})`,
      );
    }
    return n;
  };
}

function modeList(value: string): ModeName[] {
  const modes = value
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  for (const m of modes) {
    if (!(MODES as readonly string[]).includes(m))
      throw new InvalidArgumentError(`unknown mode ${JSON.stringify(m)} (modes: ${MODES.join(', ')})`);
  }
  if (!modes.length) throw new InvalidArgumentError('name at least one mode');
  return modes as ModeName[];
}

interface CliOptions {
  scenario: 'outage' | 'load' | 'poisoned' | 'flaky-recovery' | 'mirror';
  trials: number;
  workers: number;
  only?: boolean;
  healthy: number;
  outage: number;
  recovery: number;
  cooldown: number;
  kind: OutageKind;
  retryAfter?: number;
  tileLatency: number;
  latencyMs?: number;
  hangS?: number;
  attempts: number;
  backoffBase: number;
  backoffCap: number;
  probeAttempts: number;
  window: number;
  minSamples: number;
  failureRatio: number;
  ramp?: number;
  modes: ModeName[];
  json?: string;
  debug?: boolean;
  dumpRaw?: string;
}

const program = new Command('bench:outage')
  .description(
    'outage benchmark: shared (tilebreaker) vs per-process (cockatiel) vs retry-only breakers, one local tile server',
  )
  .addOption(
    new Option(
      '--scenario <name>',
      'outage: the three modes through one outage; load: what the breaker costs Temporal (bench/outage/load.ts); poisoned: one worker failing every call locally (bench/outage/poisoned.ts); flaky-recovery: a server back with 2 answers in 3, consecutive against k-of-n probes (bench/outage/flaky-recovery.ts); mirror: tiles fetched as the pipeline fetches them from a failing primary with a healthy mirror (bench/outage/mirror.ts)',
    )
      .choices(['outage', 'load', 'poisoned', 'flaky-recovery', 'mirror'])
      .default('outage'),
  )
  .option('--workers <n>', 'simulated workers per mode', num(1, true), 60)
  .option('--only', 'load: run only the --workers fleet (no 60-worker run first)')
  .option('--trials <n>', 'flaky-recovery: outages per mode', num(1, true), FLAKY_RECOVERY_DEFAULTS.trials)
  .option('--healthy <s>', 'healthy warm-up before the outage, seconds', num(0.5), 5)
  .option('--outage <s>', 'outage length, seconds', num(0.5), 40)
  .option('--recovery <s>', 'recovered phase after the outage, seconds', num(0.5), 15)
  .option('--cooldown <ms>', 'breaker cooldown (both breaker modes), ms', num(1, true), 1000)
  .addOption(
    new Option('--kind <kind>', 'outage kind: 503 answers, refused connections, or a hang (accepted, never answered)')
      .choices(OUTAGE_KINDS)
      .default('503'),
  )
  .option('--retry-after <s>', 'Retry-After (seconds) on the 503 answers (default: none)', num(0, true))
  .option('--tile-latency <ms>', 'mean render time of a healthy tile, ms (each takes 0.5x..1.5x)', num(0), 150)
  .option('--latency-ms <ms>', 'the same as --tile-latency (a server that renders in about this long)', num(0))
  .option('--hang-s <s>', 'with --kind hang: how long the hang lasts, seconds (the same as --outage)', num(0.5))
  .option('--attempts <n>', 'retry policy: attempts per tile', num(1, true), 3)
  .option('--backoff-base <ms>', 'retry policy: full-jitter backoff base, ms', num(0), 100)
  .option('--backoff-cap <ms>', 'retry policy: backoff cap, ms', num(0), 2000)
  .option('--probe-attempts <n>', 'attempts a half-open probe gets (both breaker modes)', num(1, true), 1)
  .option('--window <ms>', 'breaker window, ms', num(1000, true), 30_000)
  .option('--min-samples <n>', 'breaker minimum samples in the window', num(1, true), 20)
  .option('--failure-ratio <r>', 'breaker failure ratio that trips', num(0.01), 0.5)
  .option('--ramp <ms>', "shared: the entity's ramp after recovery, ms (default: the project's default)", num(0, true))
  .option('--modes <list>', `modes to run, in order (${MODES.join(',')})`, modeList, [...MODES])
  .option('--json <file>', 'also write every figure as JSON to this file')
  .option(
    '--debug',
    "shared: print the intervals overlapping at each half-open peak, with the entity's transitions around it",
  )
  .option(
    '--dump-raw <file>',
    'shared: write the raw recording (attempts, views, server requests, transitions) as JSON to this file',
  );

async function main(): Promise<void> {
  program.parse();
  const o = program.opts<CliOptions>();
  if (o.scenario === 'poisoned') {
    Runtime.install({ logger: new DefaultLogger((process.env.TILEBREAKER_LOG_LEVEL as 'INFO' | undefined) ?? 'WARN') });
    const log = (m: string) => console.error(`[bench:outage ${new Date().toISOString().slice(11, 19)}] ${m}`);
    return runPoisonedScenario(
      { workers: o.workers, durationMs: 20_000, tileLatencyMs: o.tileLatency, badWorker: Math.floor(o.workers / 3) },
      log,
    );
  }
  if (o.scenario === 'flaky-recovery') {
    Runtime.install({ logger: new DefaultLogger((process.env.TILEBREAKER_LOG_LEVEL as 'INFO' | undefined) ?? 'WARN') });
    const log = (m: string) => console.error(`[bench:outage ${new Date().toISOString().slice(11, 19)}] ${m}`);
    const given = (name: string) => program.getOptionValueSource(name) !== 'default';
    const f = await runFlakyRecoveryScenario({
      ...FLAKY_RECOVERY_DEFAULTS,
      trials: o.trials,
      ...(given('workers') ? { workers: o.workers } : {}),
      log,
    });
    for (const [mode, seconds] of Object.entries(f.seconds)) {
      const mean = seconds.reduce((a, b) => a + b, 0) / Math.max(1, seconds.length);
      log(
        `flaky-recovery: ${mode}: mean ${mean.toFixed(2)} s; per trial ${seconds.map((s) => s.toFixed(1)).join(' ')}; cut off ${f.cutOff[mode as keyof typeof f.cutOff]}`,
      );
    }
    console.log(flakyRecoveryLine(f));
    return;
  }
  if (o.latencyMs !== undefined) o.tileLatency = o.latencyMs;
  if (o.hangS !== undefined) {
    if (o.kind !== 'hang') program.error(`error: --hang-s needs --kind hang (got --kind ${o.kind})`);
    o.outage = o.hangS;
  }
  if (o.failureRatio >= 1)
    throw new InvalidArgumentError(`--failure-ratio must be < 1 for cockatiel (got ${o.failureRatio})`);
  const scenario: Scenario = {
    workers: o.workers,
    healthyMs: o.healthy * 1000,
    outageMs: o.outage * 1000,
    recoveryMs: o.recovery * 1000,
    outageKind: o.kind,
    retryAfterSec: o.retryAfter ?? null,
    tileLatencyMs: o.tileLatency,
    retry: { attempts: o.attempts, baseMs: o.backoffBase, capMs: o.backoffCap },
    probeAttempts: o.probeAttempts,
    rampMs: o.ramp ?? null,
    breaker: { windowMs: o.window, minSamples: o.minSamples, failureRatio: o.failureRatio, cooldownMs: o.cooldown },
  };
  // The SDK logs worker state changes and bundling at INFO.
  Runtime.install({ logger: new DefaultLogger((process.env.TILEBREAKER_LOG_LEVEL as 'INFO' | undefined) ?? 'WARN') });

  const log = (m: string) => console.error(`[bench:outage ${new Date().toISOString().slice(11, 19)}] ${m}`);
  if (o.scenario === 'load') {
    // 60 s healthy, then 20 s of 503s, unless the flags say otherwise.
    const given = (name: string) => program.getOptionValueSource(name) !== 'default';
    const healthyMs = given('healthy') ? scenario.healthyMs : 60_000;
    const outageMs = given('outage') ? scenario.outageMs : 20_000;
    await runLoadScenario({
      workers: o.workers,
      ...(o.only ? { only: true } : {}),
      healthyMs,
      outageMs,
      tileLatencyMs: scenario.tileLatencyMs,
      base: scenario,
      log,
      onResult: (f) => console.log(loadLine(f)),
    });
    return;
  }
  if (o.scenario === 'mirror') {
    // The baseline, in the same run: the shared mode's requests to the server during the same outage, no mirror.
    const started = now();
    const server = await OutageServerProcess.spawn(scenario.tileLatencyMs);
    const recorder = new ModeRecorder('shared');
    let baseline: number | null = null;
    try {
      const extras = await runSharedMode(makeModeContext('shared', scenario, server, recorder, log));
      const stats = await server.stats();
      baseline = computeFigures({
        mode: 'shared',
        scenario,
        recorder,
        server: stats,
        wallMs: now() - started,
        entityTransitions: extras.transitions,
      }).outageRequests;
      log(`mirror: the shared-mode baseline's outage requests ${outageSpread(stats)}`);
    } catch (err) {
      log(`mirror: the shared-mode baseline FAILED: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      await server.close();
    }
    const f = await runMirrorScenario(scenario, log);
    log(
      `mirror: ${f.mirrorRequests} requests reached the mirror; ${f.other} tiles neither served nor holes${f.otherReason ? ` (first: ${f.otherReason})` : ''}`,
    );
    console.log(`baseline: shared mode, no mirror, the same outage: outage-requests=${baseline ?? 'n/a'}`);
    console.log(
      `target: holes=0 ${f.holes === 0 ? 'met' : 'MISSED'}; primary-requests-during-outage <= shared ${baseline !== null && f.primaryRequestsDuringOutage <= baseline ? 'met' : 'MISSED'}`,
    );
    console.log(mirrorLine(f));
    return;
  }
  log(
    `scenario: ${scenario.workers} workers, ${scenario.healthyMs / 1000} s healthy, ${scenario.outageKind} outage ${scenario.outageMs / 1000} s, ` +
      `${scenario.recoveryMs / 1000} s recovered, cooldown ${scenario.breaker.cooldownMs} ms, tile ${scenario.tileLatencyMs} ms; modes ${o.modes.join(', ')}`,
  );
  const figures: Partial<Record<ModeName, ModeFigures>> = {};
  let sharedExtras: SharedModeExtras | undefined;
  for (const mode of o.modes) {
    const started = now();
    const server = await OutageServerProcess.spawn(scenario.tileLatencyMs);
    const recorder = new ModeRecorder(mode);
    const ctx: ModeContext = makeModeContext(mode, scenario, server, recorder, log);
    log(`${mode}: tile server on ${server.baseUrl}`);
    try {
      if (mode === 'shared') sharedExtras = await runSharedMode(ctx);
      else if (mode === 'per-process') await runPerProcessMode(ctx);
      else await runRetryOnlyMode(ctx);
      const stats = await server.stats();
      figures[mode] = computeFigures({
        mode,
        scenario,
        recorder,
        server: stats,
        wallMs: now() - started,
        ...(mode === 'shared' && sharedExtras ? { entityTransitions: sharedExtras.transitions } : {}),
      });
      log(`${mode}: done, ${recorder.attempts.length} attempts`);
      if (mode === 'shared' && o.debug)
        for (const line of peakDump({
          attempts: recorder.attempts,
          server: stats,
          transitions: sharedExtras?.transitions ?? [],
          halfOpenWindow: figures[mode].halfOpenWindow,
          runs: sharedExtras?.entityRuns ?? [],
        }))
          console.error(line);
      if (mode === 'shared' && o.dumpRaw)
        writeFileSync(
          o.dumpRaw,
          JSON.stringify({
            scenario,
            attempts: recorder.attempts,
            views: recorder.views,
            server: stats,
            transitions: sharedExtras?.transitions ?? [],
            entityRuns: sharedExtras?.entityRuns ?? [],
          }),
        );
    } catch (err) {
      log(`${mode}: FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    } finally {
      await server.close();
    }
  }

  console.log('');
  for (const mode of o.modes) {
    const f = figures[mode];
    console.log(f ? modeTable(f, scenario) : `== ${mode} ==  n/a: the mode did not complete (see the log above)`);
    if (mode === 'shared' && sharedExtras && f) {
      const g = sharedExtras.guardStats;
      console.log(
        `  entity ${sharedExtras.key} on ${sharedExtras.temporalAddress}: ${sharedExtras.transitions.length} transitions; guards: ${g.viewReads} state reads, ` +
          `${g.reportsSent} reports (${g.reportErrors} errors), ${g.probesGranted} probes granted, ${g.refused} refusals, ` +
          `${sharedExtras.failOpen} fail-open calls, ${sharedExtras.deferred} tiles deferred by the ramp, ${g.stalled} stall failures counted, ${g.shed} stalled calls abandoned on the trip`,
      );
      console.log(
        sharedExtras.entityTasks
          ? entityTaskLine(sharedExtras.entityTasks)
          : '  entity workflow tasks: n/a (its histories could not be read; see the log above)',
      );
      console.log(`  policy: ${JSON.stringify(sharedPolicyConfig(scenario))}`);
    }
    if (mode === 'per-process' && f) {
      const c = cockatielBreakerOptions(scenario.breaker);
      console.log(
        `  cockatiel 3.2.1 per worker: SamplingBreaker({ threshold: ${c.threshold}, duration: ${c.duration}, minimumRps: ${c.minimumRps.toFixed(6)} }), halfOpenAfter: ${c.halfOpenAfter}`,
      );
    }
    console.log('');
  }
  console.log(DEFINITIONS);
  console.log(
    `  the retry policy under every mode: ${scenario.retry.attempts} attempts, full-jitter backoff U[0, min(${scenario.retry.capMs}, ${scenario.retry.baseMs} x 2^k)) ms; ` +
      `a half-open probe gets ${scenario.probeAttempts} attempt(s); a refused worker waits min(max(retry-after or 200, 10), 1000) ms.`,
  );
  console.log(
    '  each simulated worker has its own undici Agent (keep-alive pool), its own breaker or guard; nothing shared in memory but the process.',
  );
  if (o.modes.includes('per-process')) {
    console.log('per-process (cockatiel) differences from our policy that remain:');
    for (const d of PER_PROCESS_DIFFERENCES) console.log(`  - ${d}`);
  }
  if (scenario.outageKind === 'refused' && o.modes.includes('shared')) {
    console.log(
      "note: in a refused outage the entity's own probes are refused before the server can count them; they are missing from the shared counts.",
    );
  }
  const final = finalFigures(figures);
  console.log('');
  for (const line of targetLines(figures, final, scenario.tileLatencyMs)) console.log(line);
  if (o.json)
    writeFileSync(
      o.json,
      JSON.stringify({ scenario, figures, final, shared: sharedExtras ? { ...sharedExtras } : null }, null, 2),
    );
  console.log(finalLine(final));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
