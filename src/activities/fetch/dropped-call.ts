/**
 * A probe overtaken by recovery. A server coming back from a hang drops the connections it held; a probe sent
 * during the hang then ends without an answer the moment the server is healthy again, and reporting it as a
 * failed probe would reopen the breaker on a server that answers. So a probe whose connection the server closed
 * without an answer is sent once more at once, under the same token: a recovered server answers it, a server
 * still failing fails it. However long the probe was held (the server drops them all at once, the newest too).
 * It costs one request more per failed probe against a server that accepts connections and drops them, never
 * against one that refuses them or times out.
 */
import type { HttpExchange } from '../http/fetch-url';

/** Transport errors of a connection closed by the other side without an answer (undici, Node). */
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** The exchange ended with the server closing the connection without an answer. */
export function droppedWithoutAnswer(x: Pick<HttpExchange, 'status' | 'error'>): boolean {
  return !x.status && x.error !== undefined && DROPPED.has(x.error.code);
}
