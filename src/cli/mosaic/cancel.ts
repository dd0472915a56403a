import type { Command } from 'commander';
import { resolveMosaicId } from '../../client/mosaic-names';
import { cancelMosaic, type MosaicStatus } from '../../client/mosaics';
import type { WithClient } from '../runners';
import { summaryLine } from './result';

/** `mosaic cancel`: cancels a mosaic and says what it left. */
export function registerMosaicCancel(mosaic: Command, withClient: WithClient): void {
  mosaic
    .command('cancel')
    .description(
      'cancel a mosaic: once planned, it stops fetching and writes a partial manifest accounting for every tile; while planning, it ends with none',
    )
    .argument('<mosaic>', "the mosaic's name or workflow id")
    .option('--json', 'print JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      await withClient(async ({ client }) => {
        const id = await resolveMosaicId(client, ref);
        const s = await cancelMosaic(client, id);
        const report = cancelReport(id, s);
        if (o.json) console.log(JSON.stringify({ ...s, ...report }, null, 2));
        else console.log(report.message);
      });
    });
}

/**
 * What a `mosaic cancel` did, as it happened: `manifest` is what the run left beside its output. `final`: it
 * completed (the cancel came after every tile was fetched: assembly is not cancelled); `partial`: it was
 * planned and stopped fetching (the workflow writes a partial manifest accounting for every tile); `none`: it
 * ended before its plan was made (a plan refused, or a cancel while planning) or while assembling, and wrote
 * no manifest; `unknown`: the run answered no progress query.
 */
export function cancelReport(
  id: string,
  s: MosaicStatus & { wasRunning: boolean },
): { manifest: 'final' | 'partial' | 'none' | 'unknown'; message: string } {
  const p = s.progress;
  const how = `${s.status}${s.failure ? `: ${s.failure}` : ''}`;
  const before = s.wasRunning ? '' : `had already ended before this cancel (${how}); the cancel changed nothing. `;
  if (s.result) {
    return {
      manifest: 'final',
      message: `mosaic ${id}: ${before || 'completed before the cancel took effect (every tile was fetched; assembly is not cancelled). '}${summaryLine(s.result)}`,
    };
  }
  if (s.status === 'RUNNING')
    return {
      manifest: 'unknown',
      message: `mosaic ${id}: cancel sent; it is still running (it stops at its next workflow task)`,
    };
  const head = `mosaic ${id}: ${before || `${how}. `}`;
  if (!p)
    return {
      manifest: 'unknown',
      message: `${head}It answered no progress query, so whether it wrote a partial manifest is not known.`,
    };
  if (p.total === 0)
    return {
      manifest: 'none',
      message: `${head}It ended while planning, before any tile was fetched: no manifest was written.`,
    };
  if (p.phase === 'cancelled' || p.phase === 'failed') {
    return {
      manifest: 'partial',
      message: `${head}It stopped after ${p.done}/${p.total} tiles; its partial manifest beside the output accounts for every tile.`,
    };
  }
  return {
    manifest: 'none',
    message: `${head}It ended while ${p.phase} (${p.done}/${p.total} tiles settled) without writing a partial manifest.`,
  };
}
