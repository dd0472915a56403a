/**
 * Mosaic names: what people call a mosaic (`alps`), as opposed to its workflow id, which is derived from the
 * output path so that one output never has two runs at once. Pure: shared by the CLI, the client and the
 * workflows (which name a mosaic started without one).
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A name given by a person: 1-64 letters, digits, '.', '_' or '-', starting with a letter or a digit. */
export function checkMosaicName(name: string, field = 'name'): string {
  if (!NAME.test(name)) {
    throw new Error(
      `${field}: a mosaic name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (got ${JSON.stringify(name)})`,
    );
  }
  return name;
}

export function isMosaicName(name: string): boolean {
  return NAME.test(name);
}

/**
 * The name a mosaic gets by default: its output's base name without extension (`/tmp/x/alps.tif` -> `alps`,
 * `alps.manifest.json` -> `alps`), other characters than a name's replaced by '-'.
 */
export function defaultMosaicName(output: string): string {
  const base =
    output
      .replace(/[\\/]+$/, '')
      .split(/[\\/]/)
      .pop() ?? '';
  const stem = base.replace(/\.manifest\.json$/i, '').replace(/\.[^.]*$/, '');
  const clean = stem
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 64);
  return clean || 'mosaic';
}
