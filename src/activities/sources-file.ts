import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseSourcesFile, type SourceConfig } from '../sources/schema';

/**
 * Reads a sources file (YAML or JSON, `{ sources: { name: {...} } }`) and picks one source: the one named,
 * or the only one. Errors name the file, the field and the value.
 */
export function loadSource(file: string, name?: string): { name: string; source: SourceConfig } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`sources file ${file}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = /\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new Error(`sources file ${file}: not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
  const { sources } = parseSourcesFile(data, `sources file ${file}`);
  const names = Object.keys(sources);
  if (name !== undefined) {
    const source = sources[name];
    if (!source) throw new Error(`sources file ${file}: no source named ${JSON.stringify(name)} (it has ${names.map((n) => JSON.stringify(n)).join(', ') || 'none'})`);
    return { name, source };
  }
  if (names.length !== 1) throw new Error(`sources file ${file}: it has ${names.length} sources (${names.join(', ')}); name one with --name`);
  return { name: names[0]!, source: sources[names[0]!]! };
}
