import { constants } from 'node:fs';
import path from 'node:path';
import { open, readFile } from 'node:fs/promises';
import { parse as parseJsonc, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { ConfigError } from '../breaker/config-error';
import { maskSecretsInText } from '../breaker/redact';
import { parseSourcesFile, type SourceConfig } from '../sources/schema';
import { confinePath } from './confine/confine';

/**
 * A sources file is a few kilobytes; anything much larger is not one. yaml's duplicate-key check is quadratic
 * in a mapping's keys, so lines are bounded too (10,000 keep a parse under a second).
 */
const MAX_SOURCES_BYTES = 256 * 1024;
const MAX_SOURCES_LINES = 10_000;
const EXTENSIONS = /\.(ya?ml|json)$/i;

export interface SourceReadOptions {
  /**
   * Read on a worker for a requester: the file must lie under these folders (after symlinks), be a regular
   * file named .yaml, .yml or .json and at most 1 MiB, and no error quotes its content. Without roots the file
   * is the user's own (the CLI): errors show a code frame.
   */
  roots?: readonly string[];
  /** Who asks, for the error's subject (default "sources file"). */
  subject?: string;
  /** The request field that named the file, for refusals of the path itself. */
  field?: string;
}

/**
 * Reads a sources file (YAML or JSON, `{ sources: { name: {...} } }`) and picks one source: the one named,
 * or the only one. Errors name the file, the field and the value.
 */
export async function loadSource(
  file: string,
  name?: string,
  opts: SourceReadOptions = {},
): Promise<{ name: string; source: SourceConfig; file: string; mirrors: { name: string; source: SourceConfig }[] }> {
  const worker = opts.roots !== undefined;
  const subject = opts.subject ?? 'sources file';
  const { text, real } = worker
    ? await readConfined(file, opts.roots!, subject, opts.field ?? 'sourcesFile')
    : { text: await readLocal(file), real: path.resolve(file) };
  const data = parseText(file, text, worker);
  // Quoted only under `sources`, even for the CLI: a file named by mistake is not shown back.
  const { sources } = parseSourcesFile(data, `sources file ${file}`, true);
  const names = Object.keys(sources);
  if (name !== undefined) {
    // Own names only: `constructor` or `toString` must not pick something off Object.prototype.
    const source = Object.hasOwn(sources, name) ? sources[name] : undefined;
    if (!source)
      throw new ConfigError(`sources file ${file}`, [
        `no source named ${JSON.stringify(name)} (it has ${names.map((n) => JSON.stringify(n)).join(', ') || 'none'})`,
      ]);
    return { name, source, file: real, mirrors: mirrorsOf(source, sources) };
  }
  if (names.length !== 1)
    throw new ConfigError(`sources file ${file}`, [
      `it has ${names.length} sources (${names.join(', ')}); name one with --name (sourceName in a request)`,
    ]);
  return { name: names[0]!, source: sources[names[0]!]!, file: real, mirrors: mirrorsOf(sources[names[0]!]!, sources) };
}

/** The sources a source names as its mirrors, in its order (the file's check made sure each exists). */
function mirrorsOf(
  source: SourceConfig,
  sources: Record<string, SourceConfig>,
): { name: string; source: SourceConfig }[] {
  return (source.mirrors ?? []).filter((m) => Object.hasOwn(sources, m)).map((m) => ({ name: m, source: sources[m]! }));
}

async function readLocal(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`sources file ${file}`, [(err as Error).message]);
  }
}

/** The file's text, after every check that keeps a requester from reading what is not a sources file. */
async function readConfined(
  file: string,
  roots: readonly string[],
  subject: string,
  field: string,
): Promise<{ text: string; real: string }> {
  if (!EXTENSIONS.test(file))
    throw new ConfigError(subject, [`${field}: ${JSON.stringify(file)} must name a .yaml, .yml or .json file`]);
  const real = await confinePath(file, roots, field, subject);
  const refuse = (why: string): never => {
    throw new ConfigError(subject, [`${field}: ${JSON.stringify(file)} ${why}`]);
  };
  // Non-blocking, so a FIFO cannot hold the activity; the type is checked on the open file, not the name.
  const handle = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW).catch(
    (err: NodeJS.ErrnoException) => refuse(`cannot be read (${err.code ?? 'error'})`),
  );
  try {
    const st = await handle.stat();
    if (!st.isFile()) refuse('is not a regular file');
    if (st.size > MAX_SOURCES_BYTES) refuse(`is larger than ${MAX_SOURCES_BYTES} bytes, too large for a sources file`);
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await handle.read(buf, 0, st.size, 0);
    const text = buf.subarray(0, bytesRead).toString('utf8');
    if (text.split('\n').length > MAX_SOURCES_LINES)
      refuse(`has more than ${MAX_SOURCES_LINES} lines, too many for a sources file`);
    return { text, real };
  } finally {
    await handle.close();
  }
}

/**
 * YAML or JSON by extension. A syntax error names the file, line and column; only for the user's own file
 * (no roots) does it quote the lines around it.
 */
function parseText(file: string, text: string, worker: boolean): unknown {
  const subject = `sources file ${file}`;
  if (/\.json$/i.test(file)) {
    try {
      return JSON.parse(text);
    } catch {
      const errors: ParseError[] = [];
      parseJsonc(text, errors, { disallowComments: true, allowTrailingComma: false });
      const first = errors[0];
      // V8's message quotes the text: locate the error with a parser that reports positions instead.
      const at = first ? ` at ${lineCol(text, first.offset)}: ${words(printParseErrorCode(first.error))}` : '';
      throw new ConfigError(subject, [
        `not valid JSON${at}${worker || !first ? '' : `:\n\n${maskSecretsInText(codeFrame(text, first.offset))}`}`,
      ]);
    }
  }
  try {
    return parseYaml(text, { prettyErrors: !worker });
  } catch (err) {
    if (!(err instanceof YAMLParseError)) {
      // yaml stops alias expansion past a bound (a "billion laughs" file); its other errors say nothing safe.
      throw new ConfigError(subject, [
        /alias/i.test((err as Error).message) ? 'not valid YAML: too many alias expansions' : 'not valid YAML',
      ]);
    }
    const where = err.pos ? ` at ${lineCol(text, err.pos[0])}` : '';
    // yaml's message carries a code frame of the file; its error code says what went wrong without one.
    // The user's own file may show its lines (secrets masked all the same: terminals get pasted into tickets).
    throw new ConfigError(subject, [
      worker
        ? `not valid YAML${where}: ${words(err.code)}`
        : `not valid YAML: ${maskSecretsInText(err.message.trim())}`,
    ]);
  }
}

/** A parser's error code as words: InvalidSymbol, BLOCK_AS_IMPLICIT_KEY -> "invalid symbol", "block as implicit key". */
function words(code: string): string {
  return code
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/_/g, ' ')
    .toLowerCase();
}

/** The line holding `offset` and a caret under it. */
function codeFrame(text: string, offset: number): string {
  const start = text.lastIndexOf('\n', offset - 1) + 1;
  const end = text.indexOf('\n', offset);
  const line = text.slice(start, end === -1 ? undefined : end).slice(0, 200);
  return `${line}\n${' '.repeat(Math.min(offset - start, 200))}^`;
}

function lineCol(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - before.lastIndexOf('\n')}`;
}
