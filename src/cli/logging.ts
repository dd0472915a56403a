import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import { fetchTaskQueue } from '../messages/activities';

const LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];
const FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof FORMATS)[number];

export interface LogSettings {
  /** tilebreaker's own entries (breaker transitions, fail-open, workflow and activity logs). */
  level: LogLevel;
  /** The SDK's worker and core chatter (state changes, bundling): WARN unless the level is set explicitly. */
  sdkLevel: LogLevel;
  format: LogFormat;
}

/**
 * The log settings from the environment: TILEBREAKER_LOG_LEVEL (default INFO for `tilebreaker worker`, WARN
 * for the commands that run a worker in passing) and TILEBREAKER_LOG_FORMAT (json, the default: one object
 * per line; or text). A bad value is an error naming the variable and the value.
 */
export function logSettings(env: NodeJS.ProcessEnv, defaultLevel: LogLevel): LogSettings {
  const raw = env.TILEBREAKER_LOG_LEVEL?.trim().toUpperCase();
  if (raw !== undefined && raw !== '' && !(LEVELS as readonly string[]).includes(raw)) {
    throw new Error(
      `TILEBREAKER_LOG_LEVEL must be one of ${LEVELS.join(', ')} (got ${JSON.stringify(env.TILEBREAKER_LOG_LEVEL)})`,
    );
  }
  const format = env.TILEBREAKER_LOG_FORMAT?.trim().toLowerCase() || 'json';
  if (!(FORMATS as readonly string[]).includes(format)) {
    throw new Error(
      `TILEBREAKER_LOG_FORMAT must be one of ${FORMATS.join(', ')} (got ${JSON.stringify(env.TILEBREAKER_LOG_FORMAT)})`,
    );
  }
  const explicit = raw ? (raw as LogLevel) : null;
  return { level: explicit ?? defaultLevel, sdkLevel: explicit ?? 'WARN', format: format as LogFormat };
}

/** The SDK's warning, at its start, for a worker that polls for activities only. */
const NO_WORKFLOWS = 'No workflows registered, not polling for workflow tasks';

/**
 * The process's logger, given to the Temporal runtime (so workflow, activity, worker and core entries all come
 * through it) and to the breaker guard. One line per entry: JSON with `time`, `level`, `msg` and the entry's
 * fields, or text. Its settings can change after it is installed (the runtime takes one logger, at start).
 */
export class LineLogger implements Logger {
  constructor(
    public settings: LogSettings,
    private readonly write: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
    private readonly now: () => Date = () => new Date(),
  ) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    const component = meta?.['sdkComponent'] as string | undefined;
    // The fetch worker (src/client/worker.ts) has no workflows by design: the SDK's warning says nothing wrong.
    if (level === 'WARN' && message === NO_WORKFLOWS && String(meta?.['taskQueue']).endsWith(fetchTaskQueue('')))
      level = 'DEBUG';
    const threshold = component === 'worker' || component === 'core' ? this.settings.sdkLevel : this.settings.level;
    if (LEVELS.indexOf(level) < LEVELS.indexOf(threshold)) return;
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(meta ?? {}))
      fields[k] = typeof v === 'bigint' ? String(v) : v instanceof Error ? v.message : v;
    const time = this.now().toISOString();
    if (this.settings.format === 'json') {
      this.write(JSON.stringify({ time, level, msg: message, ...fields }));
    } else {
      const rest = Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : '';
      this.write(`${time} [${level}] ${message}${rest}`);
    }
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}
