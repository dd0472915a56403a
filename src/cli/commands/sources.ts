import type { Command } from 'commander';

/** `tilebreaker sources import`: the sources group (src/cli/sources-commands.ts runs its import). */
export function registerSourcesCommands(program: Command): void {
  program
    .command('sources')
    .description('sources files')
    .command('import')
    .description(
      'write sources from a WMS or WMTS capabilities document: layers, formats, styles, matrix sets (as grids), zoom ranges',
    )
    .argument('<url-or-file>', 'the GetCapabilities URL, or a saved document')
    .option('--out <file>', 'write the sources file here (default: stdout)')
    .option('--force', 'replace --out if it exists')
    .option(
      '--use-fetched-url',
      'send GetMap and KVP GetTile requests to the URL given here, not the one the document reports (a server behind a proxy)',
    )
    .option('--json', 'print { sources, notes } as JSON')
    .action(async (from: string, opts: { out?: string; force?: boolean; json?: boolean; useFetchedUrl?: boolean }) => {
      const { importSources } = await import('../sources-commands.js');
      process.exitCode = await importSources(from, opts);
    });
}
