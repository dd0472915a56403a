import type { Command } from 'commander';
import type { TileCommandOptions } from '../tile-command';

/** `tile`'s options as commander parses them: --source is a source's name (or, the older spelling, a file). */
type TileFlags = Omit<TileCommandOptions, 'source'> & { source?: string; sources?: string; json?: boolean };

/** `tilebreaker tile`: one tile through the fetch path (src/cli/tile-command.ts runs it). */
export function registerTileCommand(program: Command): void {
  program
    .command('tile')
    .description(
      "fetch one tile through the pipeline's fetch path and print one JSON object (exit 0 when it is a good tile)",
    )
    .argument('<zxy>', 'the tile as Z/X/Y (XYZ rows, from the top)')
    .option('--sources <file>', 'sources file (YAML or JSON)')
    .option('--source <name>', 'which source in the file (default: its only one), as mosaic start and seed take it')
    .option('--name <source>', 'the same as --source')
    .option('--breaker', 'go through the fleet-wide breaker at TEMPORAL_ADDRESS')
    .option('--attempts <n>', "attempts, with the pipeline's backoff between them", '1')
    .option('--out <dir>', 'keep the tile in this tile store folder')
    .option('--json', 'print JSON (what tile always prints: accepted so that every command takes it)')
    .action(async (zxy: string, { json: _json, sources, source, ...opts }: TileFlags) => {
      const { file, name } = tileSource(sources, source, opts.name);
      const { tileCommand } = await import('../tile-command.js');
      process.exitCode = await tileCommand(zxy, { ...opts, ...(name !== undefined ? { name } : {}), source: file });
    });
}

/** The sources file and the source's name a `tile` command line gives. */
function tileSource(
  sources: string | undefined,
  source: string | undefined,
  nameFlag: string | undefined,
): { file: string; name: string | undefined } {
  // One spelling for every command: --sources FILE --source NAME. The older `--source FILE` (without
  // --sources) still works, with a note, when it names a .yaml, .yml or .json file.
  let file = sources;
  let name = nameFlag;
  if (source !== undefined && file === undefined && /\.(ya?ml|json)$/i.test(source)) {
    console.error(
      'tilebreaker: tile --source FILE is the older spelling; give --sources FILE --source NAME, as mosaic start and seed take them',
    );
    file = source;
  } else if (source !== undefined) {
    if (name !== undefined && name !== source)
      throw new Error(
        `tile: --source ${JSON.stringify(source)} and --name ${JSON.stringify(name)} name different sources; give one`,
      );
    name = source;
  }
  if (file === undefined)
    throw new Error('tile: give the sources file with --sources FILE (and the source in it with --source NAME)');
  return { file, name };
}
