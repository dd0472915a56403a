import { InvalidArgumentError } from 'commander';
import { durationMs } from '../messages/duration';

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
