/**
 * Keeps secrets out of messages: error texts end up in workflow failures, histories, manifests and logs, which
 * more people can read than the worker's environment. Pure and Node-free, like the rest of this folder.
 */

/** Header and field names whose values are credentials. */
const CREDENTIAL_NAME =
  /^(authorization|proxy-authorization|cookie|set-cookie)$|passw|pwd|secret|token|api[-_]?key|apikey|credential|session|private[-_]?key|signature|subscription|(^|[-_.])(auth|key|sig)$/i;

/** A long run of token characters with letters and digits: an API key, a hash, a base64 secret. */
const TOKEN_LIKE = /^[A-Za-z0-9+/_=.~-]{40,}$/;

export const MASK = '***';

function isCredentialName(name: string): boolean {
  // `tokenEnv`, `passwordEnv`: the name of a variable that holds the secret, not the secret.
  return CREDENTIAL_NAME.test(name) && !/Env$/.test(name);
}

/** A string that looks like a credential whatever its field: shown by its length only. */
function looksSecret(value: string): boolean {
  return (
    (TOKEN_LIKE.test(value) && /[0-9]/.test(value) && /[A-Za-z]/.test(value)) ||
    /-----BEGIN [A-Z ]*(KEY|CERTIFICATE)/.test(value)
  );
}

/** URLs in `text` with their user:password@ and credential-like query parameters masked. */
export function maskUrlSecrets(text: string): string {
  return text
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/?#\s@"']*@/gi, `$1${MASK}@`)
    .replace(/([?&])([^=&#\s"']+)=([^&#\s"']*)/g, (m, sep: string, name: string) =>
      isCredentialName(decodeSafe(name)) ? `${sep}${name}=${MASK}` : m,
    );
}

/**
 * Free text (a code frame of a config file, a server's message) with what looks secret masked: URLs' userinfo
 * and credential-like query parameters, values after a credential-like name (`token: x`, `SECRET=x`,
 * `"password": "x"`), and token-like words.
 */
export function maskSecretsInText(text: string): string {
  return maskUrlSecrets(text)
    .replace(
      /(["']?)([A-Za-z0-9_.-]+)\1(\s*[:=]\s*)("[^"\n]*"?|'[^'\n]*'?|[^\s,;}\]]+)/g,
      (m, q: string, name: string, sep: string) => (isCredentialName(name) ? `${q}${name}${q}${sep}${MASK}` : m),
    )
    .replace(/[A-Za-z0-9+/_=.~-]{40,}/g, (w) => (looksSecret(w) ? `<${w.length} characters, not shown>` : w));
}

/** `text` with each of `secrets` (the values actually sent) replaced by the mask: a server may echo them. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join(MASK);
  return out;
}

/**
 * A copy of `value` fit for a message: values under credential-like names masked, URLs' userinfo masked,
 * token-like strings replaced by their length.
 */
export function redactValue(value: unknown, name?: string, depth = 0): unknown {
  if (name !== undefined && isCredentialName(name) && value !== undefined && value !== null && value !== '')
    return MASK;
  if (typeof value === 'string')
    return looksSecret(value) ? `<${value.length} characters, not shown>` : maskUrlSecrets(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, undefined, depth + 1));
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redactValue(v, k, depth + 1)]),
  );
}

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
