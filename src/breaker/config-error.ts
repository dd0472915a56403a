import type { z } from 'zod';
import { redactValue } from './redact';

/**
 * A configuration value was rejected. `issues` name each field by its dotted path and show the value
 * received, e.g. `windowMs: must be >= 1000 (got 5)`.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly subject: string,
    readonly issues: readonly string[],
  ) {
    super(`${subject}: ${issues.join('; ')}`);
  }
}

export interface ParseOptions {
  /**
   * Whether an issue at this path may quote what it found (values, unknown field names). A file the worker
   * reads on a requester's behalf may be any file: only what lies in a recognised part of it is quoted.
   * Quoted values are masked where they look like credentials, whatever this says.
   */
  mayQuote?: (path: readonly PropertyKey[]) => boolean;
}

/** Parses `input` with `schema`; on failure throws a ConfigError naming every bad field and its value. */
export function parseOrThrow<S extends z.ZodType>(
  schema: S,
  input: unknown,
  subject: string,
  opts: ParseOptions = {},
): z.output<S> {
  const result = schema.safeParse(input, { reportInput: true });
  if (result.success) return result.data;
  // A value with thousands of bad parts (a forged coverage) gets the first few named, not a message of megabytes.
  const issues = result.error.issues;
  const named = issues.slice(0, MAX_ISSUES).map((i) => describeIssue(i, opts.mayQuote?.(i.path) ?? true));
  throw new ConfigError(
    subject,
    issues.length > MAX_ISSUES ? [...named, `and ${issues.length - MAX_ISSUES} more problems`] : named,
  );
}

/** Problems a ConfigError names one by one. */
const MAX_ISSUES = 20;

function describeIssue(issue: z.core.$ZodIssue, quote: boolean): string {
  const field = issue.path.length ? issue.path.map(String).join('.') : '(root)';
  if (issue.code === 'unrecognized_keys') {
    const n = issue.keys.length;
    if (!quote) return `${field}: ${n} unknown field${n > 1 ? 's' : ''} (not shown)`;
    return `${field}: unknown field${n > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  if (issue.code === 'invalid_key') {
    // zod says "Invalid key in record"; the key's own rule says what a name must be.
    const parent = issue.path.slice(0, -1).map(String).join('.') || '(root)';
    const rule = issue.issues.map((i) => i.message).join('; ');
    return quote ? `${parent}: name ${showValue(redactValue(issue.input))} ${rule}` : `${parent}: a name ${rule}`;
  }
  if (!quote) return `${field}: ${issue.message}`;
  const last = issue.path[issue.path.length - 1];
  return `${field}: ${issue.message} (got ${showValue(redactValue(issue.input, typeof last === 'string' ? last : undefined))})`;
}

function showValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  // JSON.stringify would print NaN and Infinity as null, throw on a BigInt, and give nothing for a symbol or a function.
  if ((typeof value === 'number' && !Number.isFinite(value)) || typeof value === 'bigint' || typeof value === 'symbol')
    return String(value);
  if (typeof value === 'function') return 'a function';
  try {
    const text = JSON.stringify(value);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    // An object that contains itself, or whose toJSON throws.
    return 'an object JSON cannot show';
  }
}
