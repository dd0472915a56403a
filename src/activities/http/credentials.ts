import { maskUrlSecrets } from '../../breaker/redact';
import type { AuthConfig } from '../../sources/schema';

/**
 * Applies a source's credentials, read from the environment at the moment of the request (inside the
 * activity), to headers and URL. The configuration only ever names the variables.
 */
export function applyAuth(
  auth: AuthConfig | undefined,
  url: string,
  headers: Record<string, string>,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (!auth) return url;
  const read = (name: string) => {
    const value = env[name];
    if (value === undefined || value === '') throw new Error(`auth: environment variable ${name} is not set`);
    return value;
  };
  switch (auth.type) {
    case 'bearer':
      headers['authorization'] = `Bearer ${read(auth.tokenEnv)}`;
      return url;
    case 'basic':
      headers['authorization'] =
        `Basic ${Buffer.from(`${read(auth.userEnv)}:${read(auth.passwordEnv)}`).toString('base64')}`;
      return url;
    case 'header':
      headers[auth.header.toLowerCase()] = read(auth.valueEnv);
      return url;
    case 'query': {
      const u = new URL(url);
      u.searchParams.set(auth.param, read(auth.valueEnv));
      return u.toString();
    }
  }
}

/**
 * The secret values the source's auth sends, as set in the environment now: a server that echoes one (a
 * ServiceException quoting the request, an error page) must not carry it into a reason.
 */
export function credentialValues(auth: AuthConfig | undefined, env: NodeJS.ProcessEnv = process.env): string[] {
  if (!auth) return [];
  const names =
    auth.type === 'bearer'
      ? [auth.tokenEnv]
      : auth.type === 'basic'
        ? [auth.userEnv, auth.passwordEnv]
        : [auth.valueEnv];
  const values = names.map((n) => env[n]).filter((v): v is string => v !== undefined && v !== '');
  if (auth.type === 'basic' && values.length === 2)
    values.push(Buffer.from(`${values[0]}:${values[1]}`).toString('base64'));
  // As a server may quote them back: URL-encoded either way (a query string is form-encoded), JSON-escaped.
  // And each long run of letters and digits in it, which every encoding leaves as it is.
  const forms = (v: string) => [
    v,
    encodeURIComponent(v),
    new URLSearchParams([['', v]]).toString().slice(1),
    JSON.stringify(v).slice(1, -1),
    ...(v.match(/[A-Za-z0-9_-]{8,}/g) ?? []),
  ];
  return [...new Set(values.flatMap(forms))];
}

/** A URL fit for logs and manifests: credentials in the query string are masked, and so is any userinfo. */
export function redactUrl(url: string, auth: AuthConfig | undefined): string {
  // A key written into the URL itself (`?api_key=...`) is masked by its name.
  return maskUrlSecrets(maskUrl(url, auth?.type === 'query' ? auth.param : undefined));
}

/** `url` with userinfo shown as `***@` and the `secretParam` query parameter as `***`; unchanged otherwise. */
export function maskUrl(url: string, secretParam?: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  // Only a URL that carries something secret is re-serialised, so the others read exactly as requested.
  const userinfo = u.username !== '' || u.password !== '';
  const param = secretParam !== undefined && u.searchParams.has(secretParam);
  if (!userinfo && !param) return url;
  if (userinfo) {
    u.username = '***';
    u.password = '';
  }
  if (param) u.searchParams.set(secretParam, '***');
  return u.toString();
}
