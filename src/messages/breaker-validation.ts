/**
 * What the breaker entity accepts in its signals and its start input. Anyone who may signal an entity can
 * send anything: a value the policy cannot hold (a force-open for 1e308 ms, a count of -3 or "9", a
 * `file://` probe) would break every reader of the state, so the entity refuses it whole and counts the
 * refusal, and the client refuses it before sending (docs/policy.md, "What the entity accepts").
 * Pure: the workflow, the guard and the client all use it.
 */
import { z } from 'zod';
import { checkPolicyBounds, ConfigError, LATENCY_BUCKETS, OUTCOME_KINDS, parseOrThrow } from '../breaker';
import type { AdminAction, ProbeSpec } from './breaker';

/** The longest force-open an operator may time (a longer one is an open until closed or reset). */
export const MAX_FORCE_OPEN_MS = 30 * 86_400_000;
/** The longest wait a report or a probe result may ask for (a Retry-After, a 429's pause). */
export const MAX_WAIT_MS = 30 * 86_400_000;
/** A count in one report (one worker, about a second): far above any real one. */
export const MAX_COUNT = 1_000_000;
/** Calls in flight one reporter may claim. */
export const MAX_IN_FLIGHT = 100_000;
/** A probe's or call's latency: an hour is far past any timeout. */
export const MAX_LATENCY_MS = 3_600_000;
/** A self-probe URL's length (a WMS GetMap URL is a few hundred characters). */
export const MAX_PROBE_URL = 2_048;
/** How far back a report's earlier outcomes may reach (guards report at least every minute). */
export const MAX_SPAN_MS = 3_600_000;
/** How seldom a reporter may say it reports (guards cap it at a minute). */
export const MAX_REPORT_EVERY_MS = 600_000;
/** Ids, reporter and requester names, a claimed actor. */
const NAME_MAX = 256;
/** An operator's reason. */
const REASON_MAX = 1_000;

const count = z.number().int().min(0).max(MAX_COUNT);
const name = z.string().max(NAME_MAX);
const waitMs = z.number().min(0).max(MAX_WAIT_MS);

/** Header names a probe may not send: its spec is stored in the entity's history and shown by `breaker show`. */
const CREDENTIAL_HEADER =
  /^(authorization|proxy-authorization|cookie)$|token|secret|api[-_]?key|passw|credential|session|signature/i;

/**
 * A self-probe URL: http or https, no user or password in it, at most MAX_PROBE_URL characters. Written by
 * hand (not with URL, which the workflow sandbox has but a message module should not depend on).
 */
export function probeUrlProblem(url: string): string | null {
  if (url.length > MAX_PROBE_URL) return `must be at most ${MAX_PROBE_URL} characters (got ${url.length})`;
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)/i.exec(url);
  if (!m || !/^https?$/i.test(m[1]!)) return 'must be an http:// or https:// URL';
  if (m[2]!.includes('@')) return "must not carry a user or password (the spec is stored in the entity's history)";
  if (!m[2]!.replace(/:\d*$/, '')) return 'must name a host';
  if (/\s/.test(url)) return 'must not contain whitespace';
  return null;
}

export const probeSpecSchema = z.object({
  url: z.string().superRefine((url, ctx) => {
    const problem = probeUrlProblem(url);
    if (problem)
      ctx.addIssue({ code: 'custom', message: problem, input: url.length > 200 ? `${url.slice(0, 200)}…` : url });
  }),
  timeoutMs: z.number().int().min(100).max(60_000).optional(),
  headers: z
    .record(
      z
        .string()
        .max(100)
        .refine(
          (h) => !CREDENTIAL_HEADER.test(h),
          'is a credential header: a probe spec is stored in history and may carry none',
        ),
      z.string().max(1_000),
    )
    .refine((h) => Object.keys(h).length <= 20, 'at most 20 headers')
    .optional(),
  okStatuses: z.array(z.number().int().min(100).max(599)).max(20).optional(),
  contentTypePrefix: z.string().max(100).optional(),
  source: z
    .object({ file: z.string().min(1).max(4_096), name: z.string().min(1).max(200) })
    .strict()
    .optional(),
});

const countsSchema = z.object(
  Object.fromEntries(OUTCOME_KINDS.map((k) => [k, count.optional()])) as Record<
    (typeof OUTCOME_KINDS)[number],
    z.ZodOptional<typeof count>
  >,
);
const spanMs = z.number().min(0).max(MAX_SPAN_MS);

export const reportSchema = z.object({
  reporter: name,
  generation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  counts: countsSchema,
  latency: z.array(count).max(LATENCY_BUCKETS).optional(),
  earlier: z
    .object({
      counts: countsSchema,
      latency: z.array(count).max(LATENCY_BUCKETS).optional(),
      fromAgoMs: spanMs,
      toAgoMs: spanMs,
    })
    .optional(),
  everyMs: z.number().int().min(0).max(MAX_REPORT_EVERY_MS).optional(),
  retryAfterMs: waitMs.optional(),
  rateLimitedForMs: waitMs.optional(),
  inFlight: z.number().int().min(0).max(MAX_IN_FLIGHT).optional(),
  stalled: count.optional(),
  probe: probeSpecSchema.optional(),
  witness: name.optional(),
});

export const probeRequestSchema = z.object({ requestId: name.min(1), requester: name });

export const probeResultSchema = z.object({
  generation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  outcome: z.enum(OUTCOME_KINDS),
  latencyMs: z.number().min(0).max(MAX_LATENCY_MS).optional(),
  retryAfterMs: waitMs.optional(),
  reporter: name.optional(),
});

export const cancelProbeSchema = z.object({ requestId: name });

const origin = {
  actor: name.optional(),
  // As the sending process reports itself: a malformed one is recorded as `?` (admin.ts), not a reason to drop an
  // operator's action; only its size is bounded.
  sender: z
    .unknown()
    .refine((v) => v === undefined || JSON.stringify(v).length <= 1_000, 'must be at most 1,000 characters as JSON')
    .optional(),
};
const reason = z.string().max(REASON_MAX).optional();

export const adminActionSchema = z.discriminatedUnion('action', [
  z.object({
    ...origin,
    action: z.literal('force-open'),
    reason,
    durationMs: z
      .number()
      .int()
      .min(1)
      .max(MAX_FORCE_OPEN_MS, `must be at most ${MAX_FORCE_OPEN_MS} (30 days)`)
      .optional(),
  }),
  z.object({ ...origin, action: z.literal('force-close'), reason }),
  z.object({ ...origin, action: z.literal('reset'), reason }),
  z.object({ ...origin, action: z.literal('disable'), reason }),
  z.object({ ...origin, action: z.literal('enable'), reason }),
  // The fields themselves are the policy's to check (it refuses a configuration it cannot run, as a whole); their
  // bounds are checked here too, in checkSignal.
  z.object({
    ...origin,
    action: z.literal('configure'),
    config: z.record(z.string().max(100), z.unknown()).refine((c) => Object.keys(c).length <= 50, 'at most 50 fields'),
    reason,
  }),
  z.object({ ...origin, action: z.literal('set-probe'), probe: probeSpecSchema.nullable() }),
]);

/**
 * The signals the entity checks, by name, and what each must hold. Unknown fields are dropped, not refused (a
 * guard or CLI of a newer release may add one during a rolling upgrade); known ones must hold what they say.
 */
export const SIGNAL_SCHEMAS = {
  report: reportSchema,
  requestProbe: probeRequestSchema,
  probeResult: probeResultSchema,
  cancelProbe: cancelProbeSchema,
  admin: adminActionSchema,
} as const;

export type CheckedSignal = keyof typeof SIGNAL_SCHEMAS;

/**
 * Signal `signal`'s payload as the entity may apply it (fields it does not know dropped: a newer sender's
 * additions are not a reason to refuse), or why it is refused, field by field (values quoted, masked where
 * they look secret).
 */
export function checkSignal(
  signal: CheckedSignal,
  payload: unknown,
): { ok: true; value: unknown } | { ok: false; problem: string } {
  // Reports are nearly every signal, and every one is checked again whenever the entity's history is replayed:
  // the usual shape is checked by hand (a few microseconds; zod takes about 70), anything else goes to zod.
  if (signal === 'report' && isPlainReport(payload)) return { ok: true, value: payload };
  try {
    const value = parseOrThrow(SIGNAL_SCHEMAS[signal], payload, signal);
    // A configure's fields must be within the policy's bounds (POLICY_BOUNDS, src/breaker/config.ts).
    if (signal === 'admin') checkConfigureBounds(value as AdminAction);
    return { ok: true, value };
  } catch (err) {
    if (err instanceof ConfigError) return { ok: false, problem: err.issues.join('; ') };
    throw err;
  }
}

/** A configure's fields above the policy's bounds: throws a ConfigError naming each, its value and its bound. */
function checkConfigureBounds(a: AdminAction, subject = 'admin'): void {
  if (a.action === 'configure') checkPolicyBounds(a.config, subject);
}

/** An admin action, checked as the entity will check it: throws a ConfigError naming each bad field and its value. */
export function checkAdminAction(a: AdminAction): void {
  parseOrThrow(adminActionSchema, a, `breaker ${a.action}`);
  checkConfigureBounds(a, `breaker ${a.action}`);
}

/** A self-probe spec, checked as the entity will check it (throws a ConfigError). */
export function checkProbeSpec(spec: ProbeSpec, subject = 'probe'): void {
  parseOrThrow(probeSpecSchema, spec, subject);
}

const isCount = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_COUNT;
const isWait = (v: unknown): boolean => v === undefined || (typeof v === 'number' && v >= 0 && v <= MAX_WAIT_MS);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A report as guards send it, every field within reportSchema's bounds and no field it does not know (so what
 * passes here is what zod would return): true. Anything else (a probe spec, an unknown field, a bad value): false,
 * and zod decides.
 */
function isPlainReport(r: unknown): boolean {
  if (!isObject(r) || typeof r['reporter'] !== 'string' || r['reporter'].length > NAME_MAX) return false;
  for (const k in r) if (!PLAIN_REPORT_FIELDS.has(k)) return false;
  if (!isCounts(r['counts']) || !isLatency(r['latency'])) return false;
  const earlier = r['earlier'];
  if (earlier !== undefined) {
    if (!isObject(earlier) || !isCounts(earlier['counts']) || !isLatency(earlier['latency'])) return false;
    for (const k in earlier) if (!SPAN_FIELDS.has(k)) return false;
    if (!isSpan(earlier['fromAgoMs']) || !isSpan(earlier['toAgoMs'])) return false;
  }
  const everyMs = r['everyMs'];
  if (
    everyMs !== undefined &&
    !(typeof everyMs === 'number' && Number.isInteger(everyMs) && everyMs >= 0 && everyMs <= MAX_REPORT_EVERY_MS)
  )
    return false;
  const generation = r['generation'];
  if (
    generation !== undefined &&
    !(typeof generation === 'number' && Number.isSafeInteger(generation) && generation >= 0)
  )
    return false;
  const inFlight = r['inFlight'];
  if (
    inFlight !== undefined &&
    !(typeof inFlight === 'number' && Number.isInteger(inFlight) && inFlight >= 0 && inFlight <= MAX_IN_FLIGHT)
  )
    return false;
  if (r['stalled'] !== undefined && !isCount(r['stalled'])) return false;
  const witness = r['witness'];
  if (witness !== undefined && !(typeof witness === 'string' && witness.length <= NAME_MAX)) return false;
  return isWait(r['retryAfterMs']) && isWait(r['rateLimitedForMs']);
}

const isCounts = (counts: unknown): boolean => {
  if (!isObject(counts)) return false;
  for (const k in counts) if (!OUTCOME_SET.has(k) || !(counts[k] === undefined || isCount(counts[k]))) return false;
  return true;
};
const isLatency = (latency: unknown): boolean =>
  latency === undefined || (Array.isArray(latency) && latency.length <= LATENCY_BUCKETS && latency.every(isCount));
const isSpan = (v: unknown): boolean => typeof v === 'number' && v >= 0 && v <= MAX_SPAN_MS;

const PLAIN_REPORT_FIELDS = new Set([
  'reporter',
  'generation',
  'counts',
  'latency',
  'earlier',
  'everyMs',
  'retryAfterMs',
  'rateLimitedForMs',
  'inFlight',
  'stalled',
  'witness',
]);
const SPAN_FIELDS = new Set(['counts', 'latency', 'fromAgoMs', 'toAgoMs']);
const OUTCOME_SET = new Set<string>(OUTCOME_KINDS);
