import type { Command } from 'commander';
import { resolveBreakerKey, showBreaker } from '../../client/breakers';
import { openReport } from '../../client/open-intervals';
import { parseDuration } from '../duration-option';
import { formatOpenReport, formatShow } from './format';
import { keyHelp, parseCount, partitionHelp, partitionOf, type WithClient } from './options';

interface ShowOptions {
  partition?: string;
  limit: number;
  since?: number;
  json?: boolean;
}

/** `breaker show`: one breaker's state, figures and transition log (and with --since, its open intervals). */
export function registerBreakerShow(breaker: Command, withClient: WithClient): void {
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
    .action(async (key: string, opts: ShowOptions) => {
      const resolved = resolveBreakerKey(key, partitionOf(opts));
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
}
