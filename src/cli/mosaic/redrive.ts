import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { resolveMosaicId } from '../../client/mosaic-names';
import { startRedrive } from '../../client/mosaics';
import type { MosaicMemo } from '../../messages/search-attributes';
import { parseDuration } from '../duration-option';
import type { WithClient } from '../runners';
import { showMosaicProgress } from './progress';
import { finish } from './result';

interface RedriveOptions {
  id?: string;
  sources?: string;
  name?: string;
  source?: string;
  waitFor?: number;
  replaceMirrors?: boolean;
  wait?: boolean;
  json?: boolean;
}

/** `mosaic redrive`: fetches a mosaic's dead-lettered tiles again and rebuilds it. */
export function registerMosaicRedrive(mosaic: Command, withClient: WithClient): void {
  mosaic
    .command('redrive')
    .description(
      "fetch only a mosaic's dead-lettered tiles, waiting (--wait-for) for the breaker to let them through, and rebuild it and its manifest",
    )
    .argument('<mosaic>', "the mosaic's manifest (.manifest.json), output (.tif), name or workflow id")
    .option(
      '--id <workflowId>',
      "workflow id (default the output's, mosaic/<base name>-<hash of the output path>: no re-drive while the mosaic or another re-drive of it runs)",
    )
    .option(
      '--sources <file>',
      'read the source from this sources file as it is now (a fixed URL or credential) instead of the one the mosaic was planned with',
    )
    .option('--name <source>', 'the source in --sources (when it has more than one)')
    .option('--source <name>', 'the same as --name (as mosaic start spells it)')
    .option(
      '--wait-for <duration>',
      'wait this long for the breaker to let the tiles through (e.g. 90s, 10m, 1h; default 30m); tiles still refused then stay dead-lettered',
      parseDuration,
    )
    .option(
      '--replace-mirrors',
      "also fetch the tiles its source's mirrors served from the source again (a tile the source still refuses keeps the mirror's)",
    )
    .option('--wait', 'wait for the result and exit with its code (the default)')
    .option('--no-wait', 'start it and return')
    .option('--json', 'print JSON')
    .action((manifest: string, opts: RedriveOptions) => redriveAction(manifest, opts, withClient));
}

async function redriveAction(manifest: string, opts: RedriveOptions, withClient: WithClient): Promise<void> {
  const o = { ...opts, name: opts.name ?? opts.source };
  if (o.name !== undefined && o.sources === undefined)
    throw new Error(`--name ${JSON.stringify(o.name)}: give --sources FILE as well`);
  await withClient(async ({ client, taskQueue }) => {
    const sources =
      o.sources !== undefined
        ? { sourcesFile: o.sources, ...(o.name !== undefined ? { sourceName: o.name } : {}) }
        : undefined;
    const target = await redriveTarget(client, manifest);
    const id = await startRedrive(client, taskQueue, target, o.id, sources, {
      ...(o.waitFor !== undefined ? { waitForMs: o.waitFor } : {}),
      ...(o.replaceMirrors ? { replaceMirrors: true } : {}),
    });
    if (o.wait === false) {
      console.log(o.json ? JSON.stringify({ workflowId: id }) : `started re-drive ${id}`);
      return;
    }
    process.exitCode = finish(await showMosaicProgress(client, id), !!o.json);
  });
}

/**
 * What `mosaic redrive` re-drives: a path as given, or, for a name or workflow id, the output its mosaic's
 * memo names.
 */
async function redriveTarget(client: Client, ref: string): Promise<string> {
  if (existsSync(ref) || /\.(tiff?|json)$/i.test(ref) || (ref.includes(path.sep) && !/^(mosaic|redrive)\//.test(ref)))
    return ref;
  const id = await resolveMosaicId(client, ref);
  const desc = await client.workflow.getHandle(id).describe();
  const output = (desc.memo as MosaicMemo | undefined)?.output;
  if (typeof output !== 'string')
    throw new Error(`mosaic ${id}: its memo names no output (a run from before names); give its manifest path instead`);
  return output;
}
