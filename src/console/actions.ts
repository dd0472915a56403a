import type { IncomingMessage, ServerResponse } from 'node:http';
import { confineLocation } from '../activities/confine/confine-location';
import { adminBreaker, type BreakerAdminAction } from '../client/breakers';
import { mosaicStatus, startRedrive } from '../client/mosaics';
import { readBody, sendJson } from './replies';
import type { ConsoleSite } from './site';

const ADMIN: Record<string, BreakerAdminAction> = { open: 'force-open', 'force-close': 'force-close', reset: 'reset' };

/**
 * A POST from the page: open, force closed or reset a breaker, or re-drive a mosaic. Refused unless actions are
 * on, the request comes from the console's own page (Origin) and its body is JSON.
 */
export async function takeAction(
  site: ConsoleSite,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
): Promise<void> {
  const { opts } = site;
  if (!opts.allowActions)
    return sendJson(res, 403, {
      error:
        'actions are off: this console is read-only (start it with --allow-actions to re-drive mosaics and open, force closed or reset breakers)',
    });
  if (req.headers.origin !== site.origin)
    return sendJson(res, 403, { error: "actions are taken from the console's own page only" });
  if (!/^application\/json\b/.test(req.headers['content-type'] ?? ''))
    return sendJson(res, 415, { error: 'an action is sent as application/json' });
  const body = await readBody(req);
  site.overview.clear();
  const b = /^\/api\/breakers\/(open|force-close|reset)$/.exec(route);
  if (b) return breakerAction(site, res, ADMIN[b[1]!]!, body);
  if (route === '/api/mosaics/redrive') return redrive(site, res, body);
  return sendJson(res, 404, { error: `no action at ${route}` });
}

async function breakerAction(
  site: ConsoleSite,
  res: ServerResponse,
  action: BreakerAdminAction,
  body: Record<string, unknown>,
): Promise<void> {
  const { opts } = site;
  const key = typeof body['key'] === 'string' ? body['key'] : '';
  if (!key) return sendJson(res, 400, { error: 'key: a breaker key is required' });
  const reason =
    typeof body['reason'] === 'string' && body['reason'] ? body['reason'].slice(0, 200) : 'from the console';
  const r = await adminBreaker(opts.client, key, action, {
    taskQueue: opts.taskQueue,
    reason,
    ...(opts.actor ? { actor: opts.actor } : {}),
  });
  return sendJson(res, 200, {
    key: r.key,
    action: r.action,
    confirmed: r.confirmed,
    state: r.status.view.state,
    transition: r.transition,
  });
}

async function redrive(site: ConsoleSite, res: ServerResponse, body: Record<string, unknown>): Promise<void> {
  const { opts } = site;
  const id = typeof body['workflowId'] === 'string' ? body['workflowId'] : '';
  if (!id) return sendJson(res, 400, { error: 'workflowId: a mosaic workflow id is required' });
  // The manifest the mosaic's own result names, checked against the roots as the page's reads are.
  const s = await mosaicStatus(opts.client, id);
  if (!s.result)
    return sendJson(res, 409, { error: `mosaic ${id} has no manifest to re-drive (${s.status.toLowerCase()})` });
  const manifest = await confineLocation(s.result.manifest, opts.roots, 'manifest', 'the console');
  const started = await startRedrive(opts.client, opts.taskQueue, manifest);
  return sendJson(res, 200, { workflowId: started });
}
