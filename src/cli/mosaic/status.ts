import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { resolveMosaicId } from '../../client/mosaic-names';
import { exitCodeFor, liveCounts, mosaicStatus, type MosaicStatus } from '../../client/mosaics';
import type { WithClient } from '../runners';
import { breakerLine, waitingLine } from './progress';
import { printResult } from './result';

/** `mosaic status`: a mosaic's state, progress, breakers and result. */
export function registerMosaicStatus(mosaic: Command, withClient: WithClient): void {
  mosaic
    .command('status')
    .description("a mosaic's state, progress by status, breakers involved, and its result when done")
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const id = await resolveMosaicId(client, ref);
        const s = await mosaicStatus(client, id);
        if (o.json) {
          console.log(JSON.stringify({ ...s, live: liveCounts(s) }, null, 2));
        } else await printStatus(client, id, s);
        process.exitCode = s.result ? exitCodeFor(s.result) : s.status === 'RUNNING' ? 0 : 1;
      });
    });
}

/** The status as text: state, live progress and the breakers' states, the wait, and the result when done. */
async function printStatus(client: Client, id: string, s: MosaicStatus): Promise<void> {
  const p = liveCounts(s);
  console.log(`mosaic ${id}: ${s.status}${s.failure ? `: ${s.failure}` : ''}`);
  if (p) {
    const c = p.counts;
    console.log(
      `  ${p.phase}: ${p.done}/${p.total} (ok ${c.ok}, stale ${c.stale}, hole ${c.hole}, dead-lettered ${c['dead-lettered']}, failed ${c.failed}${c.outside ? `, outside ${c.outside}` : ''}), ETA ${p.etaSeconds ?? '-'} s`,
    );
    console.log(`  breakers: ${await breakerLine(client, p.breakerKeys)}`);
    const waiting = waitingLine(p, Date.now());
    if (waiting) console.log(`  ${waiting}`);
  }
  if (s.result) printResult(s.result, false);
}
