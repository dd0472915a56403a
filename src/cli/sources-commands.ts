import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { sourcesFromCapabilities } from '../client/capabilities';

/** The largest capabilities document read (national services publish a few MB). */
const MAX_BYTES = 32 * 1024 * 1024;

export interface ImportOptions {
  out?: string;
  force?: boolean;
  json?: boolean;
  useFetchedUrl?: boolean;
}

/** Reads a capabilities document from an http(s) URL or a file. */
async function readDocument(from: string): Promise<string> {
  if (!/^https?:\/\//i.test(from)) {
    if (!existsSync(from)) throw new Error(`sources import: ${JSON.stringify(from)} is neither an http(s) URL nor a file`);
    return readFileSync(from, 'utf8');
  }
  const res = await fetch(from, { signal: AbortSignal.timeout(60_000), redirect: 'follow' });
  if (!res.ok) throw new Error(`sources import: ${from} answered HTTP ${res.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  if (body.length > MAX_BYTES) throw new Error(`sources import: ${from} sent ${body.length} bytes, more than ${MAX_BYTES}`);
  return body.toString('utf8');
}

/**
 * `tilebreaker sources import URL|FILE`: a sources file from a WMS or WMTS capabilities document, on stdout or
 * into `--out`; what could not become a source is listed on stderr. Exit 2 when nothing could.
 */
export async function importSources(from: string, o: ImportOptions): Promise<number> {
  const { sources, notes } = sourcesFromCapabilities(await readDocument(from), from, { useFetchedUrl: !!o.useFetchedUrl });
  const count = Object.keys(sources).length;
  const text = o.json ? `${JSON.stringify({ sources, notes }, null, 2)}\n` : `# tilebreaker sources import ${from}\n${stringify({ sources }, { aliasDuplicateObjects: false })}`;
  for (const n of notes) console.error(`note: ${n}`);
  // Thrown, as every error that stops a command is: it exits 2, and under --json prints as JSON (src/cli/errors.ts).
  if (count === 0) throw new Error(`sources import: no source could be made from ${from}${notes.length ? ' (the notes on stderr say why)' : ''}`);
  if (o.out !== undefined) {
    if (existsSync(o.out) && !o.force) throw new Error(`sources import: ${o.out} exists; give --force to replace it`);
    writeFileSync(o.out, text);
    console.error(`sources import: ${count} source${count === 1 ? '' : 's'} written to ${o.out}`);
  } else process.stdout.write(text);
  return 0;
}
