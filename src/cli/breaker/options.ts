// What the breaker subcommands share: how they connect, their common option texts and their option parsers.
import type { Client } from '@temporalio/client';
import { InvalidArgumentError } from 'commander';
import { MAX_FORCE_OPEN_MS } from '../../messages/breaker-validation';
import { BREAKER_STATES, DEFAULT_CONFIRM_TIMEOUT_MS } from '../../client/breakers';
import { parseDuration } from '../duration-option';
import { EXIT_SENT_NOT_CONFIRMED } from './confirm';

/** Connects; `taskQueue` is the fleet's (TILEBREAKER_TASK_QUEUE): where an entity an admin action starts runs. */
export type WithClient = (fn: (client: Client, taskQueue: string) => Promise<void>) => Promise<void>;

export const keyHelp =
  'breaker key as "breaker list" prints it (e.g. https://tiles.example.com:443), or an endpoint URL';
export const confirmHelp = `how long to wait, after the signal, for the breaker to show the change (default ${DEFAULT_CONFIRM_TIMEOUT_MS / 1000}s); past it the command exits ${EXIT_SENT_NOT_CONFIRMED}: sent, not yet confirmed`;
export const partitionHelp = 'with an endpoint URL: the partition (WMS layer or path prefix) of its key';

/** `--partition` as resolveBreakerKey takes it. */
export function partitionOf(opts: { partition?: string }): { partition?: string } {
  return opts.partition !== undefined ? { partition: opts.partition } : {};
}

/** `field=value` pairs: numbers, true / false and null as JSON, anything else as a string (the policy checks it). */
export function parseAssignments(pairs: string[]): Record<string, unknown> {
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

export function parseState(value: string): string {
  if (!(BREAKER_STATES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`must be one of ${BREAKER_STATES.join(', ')}.`);
  return value;
}

export function parseCount(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError('must be a whole number >= 1.');
  return n;
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
