import type { Client } from '@temporalio/client';
import { Command, InvalidArgumentError } from 'commander';
import { checkPolicyBounds, pausedForMs, type TransitionRecord } from '../breaker';
import { MAX_FORCE_OPEN_MS } from '../messages/breaker-validation';
import { durationMs } from '../messages/duration';
import { openReport, type OpenReport } from '../client/open-intervals';
import {
  adminBreaker,
  AdminNotConfirmedError,
  BREAKER_STATES,
  configureBreaker,
  DEFAULT_CONFIRM_TIMEOUT_MS,
  listBreakers,
  resolveBreakerKey,
  showBreaker,
  type AdminResult,
  type BreakerAdminAction,
  type ListResult,
  type ListedBreaker,
  type ShownBreaker,
} from '../client/breakers';
import { listJson } from './format';

/** Connects; `taskQueue` is the fleet's (TILEBREAKER_TASK_QUEUE): where an entity an admin action starts runs. */
type WithClient = (fn: (client: Client, taskQueue: string) => Promise<void>) => Promise<void>;

/**
 * The exit code of an admin action (open, close, reset, configure) that was sent, and accepted by the server,
 * but not yet confirmed by the entity: distinct from 2 (could not run: nothing was sent). docs/cli.md.
 */
export const EXIT_SENT_NOT_CONFIRMED = 5;

/**
 * `tilebreaker breaker list | show | open | close | force-close | reset | configure`: the operator's view of the fleet's
 * breakers and the admin actions, against TEMPORAL_ADDRESS (`withClient` connects). Errors throw (the CLI
 * exits 2); an admin action sent but not yet confirmed exits EXIT_SENT_NOT_CONFIRMED.
 */
export function registerBreakerCommands(program: Command, withClient: WithClient): Command {
  const breaker = program
    .command('breaker')
    .description('list, inspect, force open / closed or reset the fleet-wide breakers at TEMPORAL_ADDRESS');
  // A usage error exits 2 (a JSON error under --json): the program's exitOverride and output settings, which
  // commands created from it inherit (src/cli/main.ts).

  breaker
    .command('list')
    .description(
      'list the running breaker entities with their state (by the BreakerState / BreakerKey search attributes)',
    )
    .option(
      '--state <state>',
      `only breakers in this state (${BREAKER_STATES.join(', ')}; open includes forced-open)`,
      parseState,
    )
    .option('--json', 'print JSON')
    .action(async (opts: { state?: string; json?: boolean }) => {
      await withClient(async (client) => {
        const result = await listBreakers(client, opts.state !== undefined ? { state: opts.state } : {});
        console.log(
          opts.json
            ? listJson(result.breakers, { query: result.query, filteredBy: result.filteredBy })
            : formatList(result, opts.state, Date.now()),
        );
      });
    });

  const keyHelp = 'breaker key as "breaker list" prints it (e.g. https://tiles.example.com:443), or an endpoint URL';
  const confirmHelp = `how long to wait, after the signal, for the breaker to show the change (default ${DEFAULT_CONFIRM_TIMEOUT_MS / 1000}s); past it the command exits ${EXIT_SENT_NOT_CONFIRMED}: sent, not yet confirmed`;
  const partitionHelp = 'with an endpoint URL: the partition (WMS layer or path prefix) of its key';

  breaker
    .command('show')
    .description('show one breaker: state, window figures, permit, probes, counters and its transition log')
    .argument('<key>', keyHelp)
    .option('--partition <name>', partitionHelp)
    .option('--limit <n>', 'transitions to show, most recent first', parseCount, 20)
    .option(
      '--since <duration>',
      'also: time spent open over this last period and each open interval with its reason (e.g. 24h, 7d)',
      parseDuration,
    )
    .option('--json', 'print JSON')
    .action(async (key: string, opts: { partition?: string; limit: number; since?: number; json?: boolean }) => {
      const resolved = resolveBreakerKey(key, opts.partition !== undefined ? { partition: opts.partition } : {});
      await withClient(async (client) => {
        // --since reads the whole log the entity keeps; the listing below still shows --limit of it.
        const full = await showBreaker(client, resolved, opts.since !== undefined ? {} : { limit: opts.limit });
        const shown = { ...full, transitions: full.transitions.slice(0, opts.limit) };
        const now = Date.now();
        const report = opts.since !== undefined ? openReport(full.transitions, now - opts.since, now) : undefined;
        if (opts.json) console.log(JSON.stringify(report ? { ...shown, openReport: report } : shown, null, 2));
        else console.log(formatShow(shown, now) + (report ? `\n\n${formatOpenReport(report, opts.since!)}` : ''));
      });
    });

  const admin = (name: string, action: BreakerAdminAction, description: string) => {
    const cmd = breaker
      .command(name)
      .description(description)
      .argument('<key>', keyHelp)
      .option('--partition <name>', partitionHelp)
      .option('--reason <text>', 'why (recorded in the transition log with the actor and the sender)')
      .option(
        '--actor <who>',
        'who, for the transition log, where it is labelled as claimed beside the sender this process reports (its Temporal client identity, OS user and host) (default cli:<user>@<host>)',
      )
      .option('--json', 'print JSON');
    if (action === 'force-open') {
      cmd.option(
        '--for <duration>',
        'open for this long, at most 30d, then test recovery in half-open (e.g. 90s, 10m, 1h30m; default: until closed or reset)',
        parseForceOpenFor,
      );
    }
    cmd.option('--confirm-timeout <duration>', confirmHelp, parseDuration);
    cmd.action(
      async (
        key: string,
        opts: {
          partition?: string;
          reason?: string;
          actor?: string;
          json?: boolean;
          for?: number;
          confirmTimeout?: number;
        },
      ) => {
        const resolved = resolveBreakerKey(key, opts.partition !== undefined ? { partition: opts.partition } : {});
        await withClient(async (client, taskQueue) => {
          // The signal goes first; a key with no running entity gets one (a breaker can be opened before a
          // maintenance window). The read-back follows.
          const result = await notConfirmed(
            adminBreaker(client, resolved, action, {
              taskQueue,
              ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
              ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
              ...(opts.for !== undefined ? { durationMs: opts.for } : {}),
              ...(opts.confirmTimeout !== undefined ? { confirmTimeoutMs: opts.confirmTimeout } : {}),
            }),
            resolved.key,
            !!opts.json,
            name,
          );
          if (!result) return;
          // `command`: the command typed (`close` sends a reset), beside `action`, the signal sent.
          console.log(
            opts.json ? JSON.stringify({ command: name, ...result }, null, 2) : formatAdmin(result, Date.now(), name),
          );
          if (!result.confirmed) {
            sentNotConfirmed(
              action,
              result.key,
              result.sentAt,
              `its status still reads ${result.status.view.state} (expected ${result.expected})`,
            );
          }
        });
      },
    );
  };
  // `close` is "back to normal": automatic closed, as `reset` (it trips again on failures). Forcing closed, so
  // that it never trips, is a command of its own, `force-close`: a breaker left forced closed after a
  // maintenance window no longer protects the endpoint, which `close` made easy to miss.
  admin(
    'open',
    'force-open',
    'force a breaker open: the fleet stops calling the endpoint (optionally for a duration) until `breaker close` or `reset`',
  );
  admin(
    'close',
    'reset',
    'close a breaker: back to automatic, closed with an empty window (ends a forced open or forced closed); it trips again on failures. The same as reset',
  );
  admin(
    'force-close',
    'force-close',
    'force a breaker closed: the fleet calls the endpoint whatever its failures; it never trips until `breaker reset` (or `close`)',
  );
  admin(
    'reset',
    'reset',
    'reset a breaker to closed in automatic mode, with an empty window (ends a forced state); the same as close',
  );

  breaker
    .command('configure')
    .description(
      "change fields of a breaker's policy (e.g. maxRequestsPerSecond=20 cooldownMs=60000); the change stays until changed again, also across idle periods",
    )
    .argument('<key>', keyHelp)
    .argument('<field=value...>', 'policy fields to set (numbers, true/false, or null), the others keep their values')
    .option('--partition <name>', partitionHelp)
    .option('--actor <who>', 'who, for the transition log (recorded as claimed beside the sender)')
    .option('--json', 'print JSON')
    .option('--confirm-timeout <duration>', confirmHelp, parseDuration)
    .action(
      async (
        key: string,
        pairs: string[],
        opts: { partition?: string; actor?: string; json?: boolean; confirmTimeout?: number },
      ) => {
        const resolved = resolveBreakerKey(key, opts.partition !== undefined ? { partition: opts.partition } : {});
        const config = parseAssignments(pairs);
        // Out of the policy's bounds: refused here, before connecting (exit 2); the rest is checked against the
        // configuration in force (configureBreaker), and the entity checks both again.
        checkPolicyBounds(config, 'breaker configure');
        await withClient(async (client, taskQueue) => {
          const result = await notConfirmed(
            configureBreaker(client, resolved, config, {
              taskQueue,
              ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
              ...(opts.confirmTimeout !== undefined ? { confirmTimeoutMs: opts.confirmTimeout } : {}),
            }),
            resolved.key,
            !!opts.json,
          );
          if (!result) return;
          if (opts.json) console.log(JSON.stringify(result, null, 2));
          else {
            const changed = Object.keys(config)
              .map((k) => `${k}=${JSON.stringify((result.status.config as Record<string, unknown>)[k])}`)
              .join(' ');
            console.log(
              `breaker ${result.key}: configure ${result.confirmed ? 'done' : 'sent, NOT YET CONFIRMED'}; now ${changed}`,
            );
            if (result.transition) console.log(formatTransitionLog([result.transition]).join('\n'));
          }
          if (!result.confirmed)
            sentNotConfirmed('configure', result.key, result.sentAt, 'the change does not show in its status yet');
        });
      },
    );

  return breaker;
}

/**
 * An admin action's result, or undefined when it was sent but the entity answered no status query in time:
 * then it says so (as JSON with --json) and sets the exit code. Any other error (nothing was sent) throws.
 */
async function notConfirmed<R>(
  action: Promise<R>,
  key: string,
  json: boolean,
  command?: string,
): Promise<R | undefined> {
  try {
    return await action;
  } catch (err) {
    if (!(err instanceof AdminNotConfirmedError)) throw err;
    if (json) {
      const { action: name, workflowId, sentAt, why } = err;
      console.log(
        JSON.stringify(
          {
            ...(command !== undefined ? { command } : {}),
            key,
            workflowId,
            action: name,
            sent: true,
            sentAt,
            confirmed: false,
            why,
          },
          null,
          2,
        ),
      );
    }
    sentNotConfirmed(err.action, key, err.sentAt, err.why);
    return undefined;
  }
}

/**
 * Says that an admin signal went out and the server accepted it, but its effect is not confirmed yet, and what
 * to do; exits EXIT_SENT_NOT_CONFIRMED. The signal is in the entity's history: it applies it at its next
 * workflow task without being sent again.
 */
function sentNotConfirmed(action: string, key: string, sentAt: number, why: string): void {
  console.error(
    `tilebreaker: ${action} of breaker ${key} SENT, NOT YET CONFIRMED: the server accepted the signal at ${iso(sentAt)}, but ${why}. ` +
      `The breaker applies it at its next workflow task, without it being sent again; \`tilebreaker breaker show ${key}\` shows when it has. Sending it again does no harm.`,
  );
  process.exitCode = EXIT_SENT_NOT_CONFIRMED;
}

/** `field=value` pairs: numbers, true / false and null as JSON, anything else as a string (the policy checks it). */
function parseAssignments(pairs: string[]): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const pair of pairs) {
    const m = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(pair);
    if (!m)
      throw new InvalidArgumentError(
        `expected field=value, e.g. maxRequestsPerSecond=20 (got ${JSON.stringify(pair)})`,
      );
    const [, field, raw] = m as unknown as [string, string, string];
    config[field] = /^(-?\d+(\.\d+)?|true|false|null)$/.test(raw) ? (JSON.parse(raw) as unknown) : raw;
  }
  return config;
}

function parseState(value: string): string {
  if (!(BREAKER_STATES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`must be one of ${BREAKER_STATES.join(', ')}.`);
  return value;
}

function parseCount(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError('must be a whole number >= 1.');
  return n;
}

/** "10m", "90s", "1h30m", "500ms", "2d" -> milliseconds (the same durations a request's deadline takes). */
export function parseDuration(value: string): number {
  const ms = durationMs(value);
  if (ms === null)
    throw new InvalidArgumentError(
      `not a duration: ${JSON.stringify(value)} (give a number with a unit, e.g. 90s, 10m, 1h30m, 500ms, 2d).`,
    );
  if (!(ms > 0)) throw new InvalidArgumentError(`a duration must be longer than 0 (got ${JSON.stringify(value)}).`);
  return ms;
}

/** `breaker open --for`: a duration of whole milliseconds, at most MAX_FORCE_OPEN_MS (the entity refuses more). */
export function parseForceOpenFor(value: string): number {
  const ms = parseDuration(value);
  if (!Number.isSafeInteger(ms))
    throw new InvalidArgumentError(
      `--for must be a whole number of milliseconds (got ${JSON.stringify(value)}, ${ms} ms).`,
    );
  if (ms > MAX_FORCE_OPEN_MS)
    throw new InvalidArgumentError(
      `--for must be at most 30d (got ${JSON.stringify(value)}); to open until closed or reset, leave --for out.`,
    );
  return ms;
}

// ---------------------------------------------------------------------------------------------------------
// Human-readable output

/** A time as ISO 8601; a stored value that is no valid time prints as such rather than failing the whole listing. */
const iso = (t: number | Date | null | undefined): string => {
  if (t === null || t === undefined) return '-';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? `(invalid time: ${String(t).slice(0, 40)})` : d.toISOString();
};

/** 65_000 -> "1m 05s"; 1_500 -> "1.5s"; 250 -> "250ms". */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const s = Math.round(ms / 1_000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3_600);
  const m = Math.floor((s % 3_600) / 60);
  const sec = s % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${String(m).padStart(2, '0')}m`;
  return `${m}m ${String(sec).padStart(2, '0')}s`;
}

/** "2025-01-01T00:00:03.000Z (in 25s)" / "(3s ago)". */
function when(t: number, now: number): string {
  const d = t - now;
  return `${iso(t)} (${d >= 0 ? `in ${formatDuration(d)}` : `${formatDuration(-d)} ago`})`;
}

/** What a forced-closed breaker means, wherever its state is shown: it lets every call through and never trips. */
export const FORCED_CLOSED = 'never trips until `breaker reset` or `breaker close`';

function listDetail(b: ListedBreaker, now: number): string {
  const v = b.view;
  if (!v) return b.state === null ? 'starting (no state published yet)' : '';
  switch (v.state) {
    case 'open':
      return v.cooldownUntil !== null ? `cooldown ends ${when(v.cooldownUntil, now)}` : 'cooling down';
    case 'forced-open':
      return v.forcedUntil !== null
        ? `forced open until ${when(v.forcedUntil, now)}`
        : 'forced open until closed or reset';
    case 'half-open':
      return `probes ${v.probesOutstanding}/${v.maxConcurrentProbes} out (generation ${v.generation})`;
    case 'closed':
      if (pausedForMs(v, now) > 0) return `paced (Retry-After) until ${when(v.pacedUntil!, now)}`;
      return v.rampStartedAt !== null && v.rampStartedAt + v.rampMs > now
        ? `ramping up since ${iso(v.rampStartedAt)}`
        : '';
    case 'forced-closed':
      return `forced closed: ${FORCED_CLOSED}`;
    case 'metrics-only':
      return 'metrics only: never blocks';
  }
}

export function formatList(result: ListResult, state: string | undefined, now: number): string {
  const { breakers } = result;
  if (!breakers.length) {
    return state
      ? `no running breakers in state ${state}`
      : 'no running breakers (an entity starts with the first outcome a guard reports for its key)';
  }
  const rows = breakers.map((b) => [
    `${b.state ?? 'unknown'}${b.stateFrom === 'memo' ? '*' : ''}`,
    b.key,
    listDetail(b, now),
  ]);
  const header = ['STATE', 'KEY', 'DETAIL'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]!) : c))
      .join('  ')
      .trimEnd();
  const lines = [line(header), ...rows.map(line)];
  lines.push(
    '',
    `${breakers.length} running breaker${breakers.length === 1 ? '' : 's'}${state ? ` in state ${state}` : ''}`,
  );
  if (breakers.some((b) => b.stateFrom === 'memo'))
    lines.push("* state from the entity's memo: its BreakerState search attribute is not set");
  if (result.filteredBy === 'memo')
    lines.push("(BreakerState is not registered in this namespace: filtered by the entities' memo)");
  return lines.join('\n');
}

function formatTransitionLog(transitions: readonly TransitionRecord[]): string[] {
  if (!transitions.length) return ['  (no transitions)'];
  const moves = transitions.map((t) => `${t.from} -> ${t.to}${t.shadow ? ' (shadow)' : ''}`);
  const width = Math.max(...moves.map((m) => m.length));
  return transitions.map((t, i) => {
    const cooldown = t.cooldownMs !== undefined ? ` [cooldown ${formatDuration(t.cooldownMs)}]` : '';
    return `  ${iso(t.at)}  ${moves[i]!.padEnd(width)}  ${t.reason}: ${t.detail}${cooldown}`;
  });
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

export function formatShow(shown: ShownBreaker, now: number): string {
  const lines = [
    `breaker ${shown.key}`,
    `  workflow     ${shown.workflowId} (run ${shown.runId}, task queue ${shown.taskQueue}, started ${iso(shown.startTime)})`,
  ];
  if (!shown.running) {
    lines.push(
      `  state        not running: ${shown.executionStatus}${shown.closeTime ? ` at ${iso(shown.closeTime)}` : ''}` +
        (shown.executionStatus === 'COMPLETED' ? ' (finished idle and closed; the next report starts it again)' : ''),
    );
    lines.push(
      '',
      `transitions of that run, most recent first (${shown.transitions.length}):`,
      ...formatTransitionLog(shown.transitions),
    );
    return lines.join('\n');
  }
  const s = shown.status;
  const v = s.view;
  let state: string = v.state;
  if (v.state === 'open' && v.cooldownUntil !== null) state += `, cooldown ends ${when(v.cooldownUntil, now)}`;
  if (v.state === 'forced-open')
    state += v.forcedUntil !== null ? ` until ${when(v.forcedUntil, now)}` : ' until closed or reset';
  if (v.state === 'forced-closed') state += `: ${FORCED_CLOSED}`;
  if (v.mode === 'metrics-only') state += ` (phase ${v.phase} in the shadow)`;
  // A 429's Retry-After: the fleet holds its calls, though the breaker lets them through.
  if (pausedForMs(v, now) > 0) state += `, paced (Retry-After) until ${when(v.pacedUntil!, now)}`;
  const p = shown.permitNow;
  const permit = p.allow
    ? `allow${p.allowance < 1 ? `, allowance ${pct(p.allowance)} of normal concurrency (ramp)` : ''}`
    : p.probeRequired
      ? `probe token holders only (${v.probesOutstanding}/${v.maxConcurrentProbes} out)`
      : `refuse${p.retryAfterMs !== null ? `, retry after ${formatDuration(p.retryAfterMs)}` : ' until closed or reset'}`;
  const f = s.figures;
  const c = s.config;
  const counters = s.counters;
  lines.push(
    `  state        ${state}`,
    `  permit       ${permit}`,
    `  window       n ${f.n}: ${f.successes} ok, ${f.failures} failed (${pct(f.failureRatio)}; ${f.transient} transient, ${f.serviceException} service-exception); ` +
      `${f.permanent} permanent, ${f.neutral} neutral, ${f.rateLimited} rate-limited; p95 ${f.p95Ms === null ? '-' : `${Math.round(f.p95Ms)} ms`} (${f.latencySamples} latency samples)`,
    `  opened at    ${iso(s.openedAt)}, consecutive opens ${s.consecutiveOpens}${s.failedTrials ? `, failed trials in a row ${s.failedTrials}` : ''}`,
    `  probes       ${s.probes.length ? s.probes.map((t) => `generation ${t.generation} held by ${t.holder}, lease until ${iso(t.leaseUntil)}`).join('; ') : 'none out'}` +
      `${s.probeSuccesses ? `; ${s.probeSuccesses} successful${c.probeTrials ? '' : ' in a row'}` : ''}${s.probeFailures ? `; ${s.probeFailures} failed this round` : ''}`,
    `  self-probe   ${s.probe ? s.probe.url + (s.probe.source ? ` (headers and credentials of source ${JSON.stringify(s.probe.source.name)} in ${s.probe.source.file})` : '') : 'none configured'}`,
    `  config       window ${formatDuration(c.windowMs)}, min ${c.minSamples} samples, trip at ${pct(c.failureRatio)} failing, cooldown ${formatDuration(c.cooldownMs)} ` +
      `(x${c.cooldownMultiplier} ${flapText(c)}, cap x${c.cooldownMaxFactor}), ${c.probesToClose}${c.probeTrials ? ` of ${c.probeTrials}` : ''} probes to close${c.probeBackoff && c.probeBackoff > 1 && c.probeIntervalMs ? `, failed trials wait ${formatDuration(c.probeIntervalMs)} x${c.probeBackoff} each (cap x${c.cooldownMaxFactor})` : ''}, ramp ${formatDuration(c.rampMs)}`,
    `  counters     ${count(counters.reports, 'report')}${counters.lateReports ? ` (${counters.lateReports} late)` : ''}, ${count(counters.probeRequests, 'probe request')}, ` +
      `${count(counters.selfProbes, 'self-probe')}, ${count(counters.ignoredResults, 'ignored probe result')}, ${count(counters.refusedSignals ?? 0, 'refused signal')}, ` +
      `${counters.continuedAsNew} continue-as-new`,
    `  last report  ${iso(s.lastReportAt)}`,
    ...(s.loneFailers !== undefined
      ? [
          `  quorum       ${c.quorum ?? 1} failing reporters needed; ${count(counters.quorumDeclined ?? 0, 'trip')} declined (quorum not met); failing alone: ` +
            (s.loneFailers.length
              ? s.loneFailers.map((l) => `${l.reporter} (${l.count}x, last ${iso(l.at)})`).join(', ')
              : 'none'),
        ]
      : []),
    `  search attrs ${s.searchAttributes === null ? 'not checked yet' : s.searchAttributes ? 'BreakerState / BreakerKey kept current' : 'not kept (not registered in this namespace)'}`,
    `  as of        ${iso(s.asOf)} (the entity's last activity; history ${s.historyLength} events)`,
    '',
    `transitions, most recent first (${shown.transitions.length}):`,
    ...formatTransitionLog(shown.transitions),
  );
  return lines.join('\n');
}

/** The --since part of `breaker show`: time open over the period, then one line per interval. */
export function formatOpenReport(r: OpenReport, periodMs: number): string {
  const lines = [
    `over the last ${formatDuration(periodMs)} (since ${iso(r.since)}): open ${formatDuration(r.openMs)}, not closed ${formatDuration(r.notClosedMs)} ` +
      `(open, half-open or forced open) in ${count(r.intervals.length, 'interval')}`,
  ];
  // The entity keeps a bounded log (and a run that ended idle starts the next with none).
  if (r.truncated)
    lines.push(`  (the log starts at ${iso(r.logStartsAt)}: before that the state is taken from its first transition)`);
  for (const i of r.intervals) {
    const span = `${iso(i.from)} -> ${i.to === null ? 'now (still not closed)' : iso(i.to)}`;
    const reopens = i.reopens ? `, ${count(i.reopens, 'failed probe')}` : '';
    lines.push(
      `  ${span}  ${formatDuration(i.ms)}  ${i.reason ?? 'opened before the period'} (open ${formatDuration(i.openMs)}${reopens})`,
    );
  }
  return lines.join('\n');
}

/** An admin command's result; `command` is the command typed (`close` sends a reset), by default the action. */
export function formatAdmin(r: AdminResult, now: number, command: string = r.action): string {
  const v = r.status.view;
  let state: string = v.state;
  if (v.state === 'forced-open')
    state += v.forcedUntil !== null ? ` until ${when(v.forcedUntil, now)}` : ' until closed or reset';
  if (v.state === 'forced-closed') state += `: ${FORCED_CLOSED}`;
  if (v.state === 'closed' && v.mode === 'auto') state += ' (automatic: trips again on failures)';
  const lines = [
    `breaker ${r.key}: ${command}${command !== r.action ? ` (${r.action})` : ''} ${r.confirmed ? 'done' : 'sent, NOT YET CONFIRMED'}; state now ${state}`,
  ];
  if (r.transition) lines.push(...formatTransitionLog([r.transition]));
  else if (r.confirmed) lines.push(`  (it was already ${v.state}: no transition recorded)`);
  return lines.join('\n');
}

/** How the cooldown grows: per trip soon after a close (one incident is one open), or per open (entities before it). */
function flapText(c: { flapWindowMs?: number | null }): string {
  return c.flapWindowMs ? `per trip within ${formatDuration(c.flapWindowMs)} of a close` : 'per consecutive open';
}
