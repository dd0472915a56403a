import { XMLParser } from 'fast-xml-parser';

/** An OGC exception document: WMS ServiceExceptionReport (1.1.1, 1.3.0) or OWS ExceptionReport (WMTS, WCS). */
export interface ServiceException {
  code: string | null;
  message: string;
  /** The WMS/OWS exception code says the request was at fault (unknown layer, bad parameter...). */
  requestFault: boolean;
}

// Codes from WMS 1.1.1 / 1.3.0 and OWS 1.1 that blame the request, not the server.
const REQUEST_FAULT_CODES = new Set([
  'invalidformat',
  'invalidcrs',
  'invalidsrs',
  'layernotdefined',
  'stylenotdefined',
  'layernotqueryable',
  'invalidpoint',
  'missingdimensionvalue',
  'invaliddimensionvalue',
  'operationnotsupported',
  'missingparametervalue',
  'invalidparametervalue',
  'versionnegotiationfailed',
  'invalidupdatesequence',
  'optionnotsupported',
  'tileoutofrange',
]);

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  removeNSPrefix: true,
  trimValues: true,
  processEntities: true,
});

/** Parses an exception document; null when the XML is not one. */
export function parseServiceException(body: Buffer): ServiceException | null {
  let doc: Record<string, unknown>;
  try {
    doc = parser.parse(body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
  const wms = doc['ServiceExceptionReport'] as Record<string, unknown> | undefined;
  const ows = doc['ExceptionReport'] as Record<string, unknown> | undefined;
  let first: unknown;
  let code: string | null;
  let message: string;
  if (wms) {
    first = firstOf(wms['ServiceException']);
    code = attr(first, '@code');
    message = text(first);
  } else if (ows) {
    first = firstOf(ows['Exception']);
    code = attr(first, '@exceptionCode');
    message = text(firstOf((first as Record<string, unknown> | undefined)?.['ExceptionText'])) || text(first);
  } else {
    return null;
  }
  // Cut by the classification, after it has masked what must not be shown (a secret across the cut would show).
  message = message.replace(/\s+/g, ' ').trim().slice(0, 8_000);
  return { code, message, requestFault: code !== null && REQUEST_FAULT_CODES.has(code.toLowerCase()) };
}

function firstOf(v: unknown): unknown {
  return Array.isArray(v) ? v[0] : v;
}

function attr(node: unknown, name: string): string | null {
  if (node && typeof node === 'object' && name in node) return scalar((node as Record<string, unknown>)[name]);
  return null;
}

function text(node: unknown): string {
  if (node === undefined || node === null) return '';
  if (typeof node !== 'object') return scalar(node) ?? '';
  return scalar((node as Record<string, unknown>)['#text']) ?? '';
}

/** An attribute's or an element's text as the parser gives it (a string, or a number or boolean it read). */
function scalar(v: unknown): string | null {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : null;
}
