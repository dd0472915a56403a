import type { z } from 'zod';

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

/** Parses `input` with `schema`; on failure throws a ConfigError naming every bad field and its value. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, subject: string): z.output<S> {
  const result = schema.safeParse(input, { reportInput: true });
  if (result.success) return result.data;
  throw new ConfigError(subject, result.error.issues.map(describeIssue));
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length ? issue.path.map(String).join('.') : '(root)';
  if (issue.code === 'unrecognized_keys') {
    return `${field}: unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  return `${field}: ${issue.message} (got ${showValue(issue.input)})`;
}

function showValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  // JSON.stringify would print NaN and Infinity as null.
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  try {
    const text = JSON.stringify(value);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(value);
  }
}
