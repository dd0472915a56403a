import type { ChildProcess } from 'node:child_process';

/**
 * Child processes that must not outlive this one (servers and workers a demo or a benchmark starts). Node
 * ends on SIGINT or SIGTERM without a word to its children, and they run on; an adopted child is sent
 * SIGKILL as this process exits, whatever makes it exit, and `endOnSignals` turns those signals into an exit.
 */
/** Each child, and whether to kill its whole process group (one started `detached`, leading its own). */
const adopted = new Map<ChildProcess, boolean>();
let hooked = false;

function killAdopted(): void {
  for (const [c, group] of adopted) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    try {
      if (group && c.pid !== undefined) process.kill(-c.pid, 'SIGKILL');
      else c.kill('SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  adopted.clear();
}

/**
 * Kills `child` with SIGKILL when this process exits, if it has not ended by then; returns it. `group`: a child
 * started `detached` (leading a process group of its own) is killed with everything it started.
 */
export function adopt<C extends ChildProcess>(child: C, opts: { group?: boolean } = {}): C {
  if (!hooked) {
    hooked = true;
    process.on('exit', killAdopted);
  }
  adopted.set(child, !!opts.group);
  child.once('exit', () => adopted.delete(child));
  return child;
}

const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143 } as const;

/**
 * On the first SIGINT or SIGTERM: run `cleanup` (an orderly stop: children asked to end, files removed), for
 * at most `graceMs`, then exit with 130 or 143; the adopted children still running are killed on the way out.
 * A second signal exits at once. Returns a function that removes the handlers.
 */
export function endOnSignals(
  cleanup: () => Promise<void>,
  opts: { graceMs?: number; say?: (line: string) => void } = {},
): () => void {
  const graceMs = opts.graceMs ?? 30_000;
  let ending = false;
  const on = (signal: keyof typeof SIGNAL_EXIT) => {
    if (ending) process.exit(SIGNAL_EXIT[signal]);
    ending = true;
    opts.say?.(`${signal}: stopping the children (at most ${Math.round(graceMs / 1000)} s; again to stop at once)`);
    const timer = setTimeout(() => process.exit(SIGNAL_EXIT[signal]), graceMs);
    void cleanup()
      .catch(() => undefined)
      .finally(() => {
        clearTimeout(timer);
        process.exit(SIGNAL_EXIT[signal]);
      });
  };
  const onInt = () => on('SIGINT');
  const onTerm = () => on('SIGTERM');
  process.on('SIGINT', onInt).on('SIGTERM', onTerm);
  return () => {
    process.off('SIGINT', onInt).off('SIGTERM', onTerm);
  };
}
