import {
  MOSAIC_NAME,
  MOSAIC_PROGRESS,
  MOSAIC_SOURCE,
  MOSAIC_STATUS,
  MOSAIC_ZOOM,
  type MosaicMemo,
} from './search-attributes';

/** What a mosaic is labelled with at its start, for people: its name, source, zoom and output. */
export interface MosaicStartLabel {
  name: string;
  source: string;
  zoom: number | undefined;
  output: string;
}

/**
 * The memo and search attributes a mosaic starts with. Shared by the client (a start by hand, a re-drive) and
 * the scheduled launcher workflow (the mosaic it starts), so a scheduled run is labelled like any other.
 */
export function startLabels(label: MosaicStartLabel, attributes: boolean) {
  const memo: MosaicMemo = {
    name: label.name,
    source: label.source,
    output: label.output,
    status: 'running',
    progress: 0,
    ...(Number.isInteger(label.zoom) ? { zoom: label.zoom! } : {}),
  };
  const typedSearchAttributes = attributes
    ? [
        { key: MOSAIC_NAME, value: label.name },
        { key: MOSAIC_SOURCE, value: label.source },
        ...(Number.isInteger(label.zoom) ? [{ key: MOSAIC_ZOOM, value: label.zoom! }] : []),
        { key: MOSAIC_STATUS, value: 'running' },
        { key: MOSAIC_PROGRESS, value: 0 },
      ]
    : undefined;
  return { memo: memo as Record<string, unknown>, ...(typedSearchAttributes ? { typedSearchAttributes } : {}) };
}
