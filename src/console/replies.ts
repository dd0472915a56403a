import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { ConfigError } from '../breaker/config-error';
import { NotFound } from './mosaics-view';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
};

/** An action's body over the limit. */
class BodyTooLarge extends Error {}

/** An error's status and text for the page: known kinds say what happened, nothing quotes a path's content or a stack. */
export function answerFor(err: unknown): [number, string] {
  if (err instanceof NotFound) return [404, err.message];
  if (err instanceof URIError) return [400, 'the address is not validly encoded'];
  if (err instanceof BodyTooLarge) return [413, err.message];
  if (err instanceof ConfigError)
    return [
      403,
      "outside this console's roots (TILEBREAKER_OUTPUT_DIR, TILEBREAKER_OUTPUT_BUCKETS): it reads a worker's outputs only where the worker may write",
    ];
  if (err instanceof WorkflowNotFoundError) return [404, 'no such workflow'];
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return [500, `a file could not be read here (${code})`];
  return [500, err instanceof Error ? err.message : String(err)];
}

/** A JSON answer, never cached, for the console's own page only. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'cross-origin-resource-policy': 'same-origin',
  });
  res.end(JSON.stringify(body));
}

/** A file of the page (or of the map library), typed by its extension. */
export async function sendFile(res: ServerResponse, file: string): Promise<void> {
  const body = await readFile(file);
  res.writeHead(200, {
    'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    'x-content-type-options': 'nosniff',
    // The page runs only its own script and the bundled map library: no inline script, nothing from elsewhere.
    'content-security-policy':
      "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  });
  res.end(body);
}

/** An action's JSON body (at most 16 KB) as an object; anything but an object reads as none. */
export async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > 16_384) throw new BodyTooLarge('the request body is too large for an action');
    chunks.push(c);
  }
  try {
    const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    throw new Error('the action body is not JSON');
  }
}
