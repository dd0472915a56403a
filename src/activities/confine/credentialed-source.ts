import { ConfigError } from '../../breaker/config-error';
import type { SourceConfig } from '../../sources/schema';
import { loadSource } from '../sources-file';
import type { WorkerRoots } from './roots';

/** What decides where a source's credentials go: its URL, its auth, its headers and its redirect policy. */
function destination(s: SourceConfig): string {
  return JSON.stringify([
    s.type,
    s.url,
    s.auth ?? null,
    s.headers,
    s.redirects ?? null,
    s.maxRedirects,
    'subdomains' in s ? (s.subdomains ?? null) : null,
  ]);
}

/**
 * A source with credentials is used only as an operator's sources file (under the sources roots) writes it:
 * the requester of a block or re-drive workflow hands in the source itself, and could otherwise pair any of
 * the worker's environment variables with a URL of their own. The file is read again, as it is now.
 */
export async function checkCredentialedSource(
  source: SourceConfig,
  sourceName: string,
  sourcesFile: string | undefined,
  roots: WorkerRoots,
  subject: string,
): Promise<void> {
  if (!source.auth) return;
  if (sourcesFile === undefined) {
    throw new ConfigError(subject, [
      `source.auth: source ${JSON.stringify(sourceName)} has credentials but names no sources file; credentials are used only with sources read from one under the worker's sources roots`,
    ]);
  }
  const { source: written, file } = await loadSource(sourcesFile, sourceName, {
    roots: roots.sources,
    subject,
    field: 'sourcesFile',
  });
  if (destination(written) !== destination(source)) {
    throw new ConfigError(subject, [
      `source: ${JSON.stringify(sourceName)} differs from the one in ${file} as it is now (URL, auth, headers or redirects); its credentials go only where that file sends them (mosaic redrive --sources reads the file again)`,
    ]);
  }
}
