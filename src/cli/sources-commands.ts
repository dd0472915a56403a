import { existsSync, writeFileSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
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

/** Reads a capabilities document from an http(s) URL or a file, at most MAX_BYTES of it. */
async function readDocument(from: string): Promise<string> {
  if (!/^https?:\/\//i.test(from)) return readLocalDocument(from);
  let url: URL;
  try {
    url = new URL(from);
  } catch {
    throw new Error(`sources import: ${JSON.stringify(shown(from))} is not a valid URL`);
  }
  // Named without credentials or query (a token may ride in either).
  const where = `${url.protocol}//${url.host}${url.pathname}`;
  let res: Response;
  try {
    res = await fetch(from, { signal: AbortSignal.timeout(60_000), redirect: 'follow' });
  } catch (err) {
    throw new Error(`sources import: could not fetch ${where}: ${whyNoAnswer(err, url.host)}`, { cause: err });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`sources import: ${where} answered HTTP ${res.status}`);
  }
  const tooLarge = (n: string) => new Error(`sources import: ${where} sent ${n} bytes, more than ${MAX_BYTES}`);
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > MAX_BYTES) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(String(declared));
  }
  // Read as it comes and stopped at the cap: a server need not say its length, or may say it wrong.
  const chunks: Uint8Array[] = [];
  let total = 0;
  // Leaving the loop (the throw) cancels the body: nothing more is read.
  for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > MAX_BYTES) throw tooLarge(`over ${total}`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Why a fetch got no answer, from undici's cause: its code (ECONNREFUSED, ENOTFOUND, ...), never its text. */
function whyNoAnswer(err: unknown, host: string): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
    return 'no answer within 60 s';
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    const said = NO_ANSWER[code];
    return said ? `${said.replace('HOST', host)} (${code})` : code;
  }
  return err instanceof Error ? err.message : String(err);
}

const NO_ANSWER: Record<string, string> = {
  ECONNREFUSED: 'HOST refused the connection (nothing listens there)',
  ENOTFOUND: 'no such host HOST (DNS)',
  EAI_AGAIN: 'HOST could not be looked up now (DNS)',
  ECONNRESET: 'HOST reset the connection',
  ETIMEDOUT: 'HOST did not answer the connection in time',
  UND_ERR_CONNECT_TIMEOUT: 'HOST did not answer the connection in time',
  EHOSTUNREACH: 'HOST is unreachable from here',
  ENETUNREACH: 'no network route to HOST',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "HOST's TLS certificate could not be verified",
  CERT_HAS_EXPIRED: "HOST's TLS certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "HOST's TLS certificate is self-signed",
  ERR_TLS_CERT_ALTNAME_INVALID: "HOST's TLS certificate is for another name",
};

/** An argument as shown back: without credentials or query, if it looks like a URL at all. */
function shown(from: string): string {
  return from.replace(/\/\/[^/@]*@/, '//***@').replace(/\?.*$/, '');
}

/** A local document: a regular file, sized before it is read, read up to the cap. */
async function readLocalDocument(from: string): Promise<string> {
  let info;
  try {
    info = await stat(from);
  } catch {
    throw new Error(`sources import: ${JSON.stringify(from)} is neither an http(s) URL nor a file`);
  }
  if (!info.isFile()) throw new Error(`sources import: ${JSON.stringify(from)} is not a regular file`);
  if (info.size > MAX_BYTES)
    throw new Error(`sources import: ${JSON.stringify(from)} has ${info.size} bytes, more than ${MAX_BYTES}`);
  const handle = await open(from, 'r');
  try {
    // One byte over what stat said shows a file that grew since: refused as too large as well.
    const buf = Buffer.alloc(Math.min(MAX_BYTES, info.size) + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n === buf.length) break;
    }
    if (n > MAX_BYTES || n > info.size)
      throw new Error(`sources import: ${JSON.stringify(from)} grew while it was read; try again once it is written`);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    await handle.close();
  }
}

/**
 * `tilebreaker sources import URL|FILE`: a sources file from a WMS or WMTS capabilities document, on stdout or
 * into `--out`; what could not become a source is listed on stderr. Exit 2 when nothing could.
 */
export async function importSources(from: string, o: ImportOptions): Promise<number> {
  const { sources, notes } = sourcesFromCapabilities(await readDocument(from), from, {
    useFetchedUrl: !!o.useFetchedUrl,
  });
  const count = Object.keys(sources).length;
  const text = o.json
    ? `${JSON.stringify({ sources, notes }, null, 2)}\n`
    : `# tilebreaker sources import ${shown(from)}\n${stringify({ sources }, { aliasDuplicateObjects: false })}`;
  for (const n of notes) console.error(`note: ${n}`);
  // Thrown, as every error that stops a command is: it exits 2, and under --json prints as JSON (src/cli/errors.ts).
  if (count === 0)
    throw new Error(
      `sources import: no source could be made from ${shown(from)}${notes.length ? ' (the notes on stderr say why)' : ''}`,
    );
  if (o.out !== undefined) {
    if (existsSync(o.out) && !o.force) throw new Error(`sources import: ${o.out} exists; give --force to replace it`);
    writeFileSync(o.out, text);
    console.error(`sources import: ${count} source${count === 1 ? '' : 's'} written to ${o.out}`);
  } else process.stdout.write(text);
  return 0;
}
