import type { Command } from 'commander';

/** What `mosaic start` and `seed` do with tiles the breaker refuses, in this order: --fallback, --after-deadline, --deadline. */
export function addFallbackOptions(cmd: Command): Command {
  return cmd
    .option('--fallback <policy>', 'when the breaker refuses a tile: fail-fast | stale | hole | wait')
    .option('--after-deadline <policy>', 'for wait, after the deadline: fail-fast | stale | hole')
    .option('--deadline <when>', 'ISO instant or duration from the start (90m, 2h)');
}
