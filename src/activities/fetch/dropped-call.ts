/**
 * A call overtaken by recovery. A server coming back from a hang drops the connections it held; a call sent
 * during the hang then ends without an answer the moment the server is healthy again, and counting it as a
 * failure would open (or reopen) the breaker on a server that answers: a hang shorter than the stall threshold
 * ends in a burst of such failures, one per call in flight. So a call whose connection the server closed
 * without an answer after it had waited is sent once more at once, under the same decision: a recovered server
 * answers it, a server still failing fails it, and only that answer counts.
 *
 * A probe always goes once more (the fleet's only trial must not be lost to the drop, however short its wait);
 * an ordinary call only after waiting RESEND_AFTER_MS, the mark of held connections being let go, so a server
 * that resets connections at once (a crashed backend behind a proxy) costs no request more. A call dropped
 * after a long wait costs one request more against a server that holds connections and then drops them
 * without recovering, never against one that refuses them or times out.
 */
import type { HttpExchange } from '../http/fetch-url';

/** Transport errors of a connection closed by the other side without an answer (undici, Node). */
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** An ordinary call dropped after waiting this long is sent once more. */
export const RESEND_AFTER_MS = 1_000;

/** The exchange ended with the server closing the connection without an answer. */
export function droppedWithoutAnswer(x: Pick<HttpExchange, 'status' | 'error'>): boolean {
  return !x.status && x.error !== undefined && DROPPED.has(x.error.code);
}

/** The call under `decision` was dropped in a way that recovery may have caused: send it once more at once. */
export function resendDropped(
  decision: 'probe' | 'proceed',
  x: Pick<HttpExchange, 'status' | 'error' | 'latencyMs'>,
): boolean {
  return droppedWithoutAnswer(x) && (decision === 'probe' || x.latencyMs >= RESEND_AFTER_MS);
}
