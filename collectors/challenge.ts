import type { ChallengeClass } from '../schema/index.ts';

/** What a 401/403 challenge said, as parsed from `WWW-Authenticate` (RFC 9110 §11.6.1, RFC 6750 §3). */
export interface ChallengeInfo {
  readonly challenge_class: ChallengeClass;
  /** `scope=` of the Bearer challenge, '' when absent. */
  readonly scope: string;
  /** The challenge names `resource_metadata=` (RFC 9728 §5.1): the client can discover the authorization server. */
  readonly has_resource_metadata: boolean;
  /** `error_description=`, '' when absent (kept for expiry detection; never contains a credential). */
  readonly error_description: string;
}

/**
 * Whether a response is an authentication challenge: every 401 (RFC 9110 §15.5.2: it
 * carries a `WWW-Authenticate` challenge), and a 403 only with `WWW-Authenticate`
 * (RFC 6750 §3.1 `insufficient_scope`). A bare 403 is a refusal of another kind (the
 * SDK's Host/Origin check answers "Invalid Host header" so), not a challenge to
 * authenticate: it was counted as a `missing_credential` challenge (a break-it pass).
 * @param wwwAuthenticate the header's values (a header may repeat), possibly empty.
 */
export function isAuthChallenge(status: number, wwwAuthenticate: readonly string[]): boolean {
  return status === 401 || (status === 403 && wwwAuthenticate.some((v) => v.trim() !== ''));
}

/**
 * Classifies an authentication challenge.
 *
 * Rule (DESIGN §3, RFC 6750 §3.1): the `error=` parameter decides first —
 * `invalid_token` (→ `expired_token` when `error_description` says the token
 * expired), `insufficient_scope`, `invalid_request`; any other error value is
 * `other`. One exception: `invalid_token` on a request that carried no credential
 * at all is `missing_credential` — RFC 6750 §3.1 says a server SHOULD NOT send an
 * error code then, yet the MCP TypeScript SDK's `requireBearerAuth` (1.32) sends
 * `error="invalid_token"` to every unauthenticated request; there was no token to
 * be invalid, and this is the benign first handshake. Without `error=`: a request that carried no credential is
 * `missing_credential` (RFC 6750 §3.1: "the resource server SHOULD NOT include an
 * error code" then); with a credential, a 401 is `invalid_token` and a 403 is
 * `insufficient_scope`; anything else is `other`.
 *
 * @param status HTTP status (401 or 403; others classify as `other`).
 * @param wwwAuthenticate the header's values (a header may repeat), possibly empty.
 * @param hasCredential the request carried `Authorization` (even redacted).
 */
export function classifyChallenge(status: number, wwwAuthenticate: readonly string[], hasCredential: boolean): ChallengeInfo {
  const params = parseBearerParams(wwwAuthenticate);
  const error = (params.get('error') ?? '').toLowerCase();
  const description = params.get('error_description') ?? '';
  const base = {
    scope: params.get('scope') ?? '',
    has_resource_metadata: params.has('resource_metadata'),
    error_description: description,
  };
  let challenge_class: ChallengeClass;
  if (error === 'invalid_token' && !hasCredential) challenge_class = 'missing_credential';
  else if (error === 'invalid_token') challenge_class = /expired|expiry|exp\b/i.test(description) ? 'expired_token' : 'invalid_token';
  else if (error === 'insufficient_scope') challenge_class = 'insufficient_scope';
  else if (error === 'invalid_request') challenge_class = 'invalid_request';
  else if (error !== '') challenge_class = 'other';
  else if (!hasCredential && (status === 401 || status === 403)) challenge_class = 'missing_credential';
  else if (status === 401) challenge_class = 'invalid_token';
  else if (status === 403) challenge_class = 'insufficient_scope';
  else challenge_class = 'other';
  return { challenge_class, ...base };
}

/**
 * Parses the auth-params of the Bearer challenge (or of the first challenge when
 * none is Bearer) from `WWW-Authenticate` values: `name=token` or
 * `name="quoted string"` with backslash escapes (RFC 9110 §11.2, §5.6.4).
 * Parameter names are case-insensitive and returned lowercase.
 */
export function parseBearerParams(values: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const value of values) {
    const bearer = /(?:^|,)\s*Bearer(?:\s+|$)/i.exec(value);
    const rest = bearer ? value.slice(bearer.index + bearer[0].length) : value.replace(/^\s*[A-Za-z][\w.-]*\s+/, '');
    const re = /\s*([A-Za-z_][\w.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*(?:,|$)/y;
    let m: RegExpExecArray | null;
    while ((m = re.exec(rest)) !== null && m[0].length > 0) {
      const name = m[1]!.toLowerCase();
      if (!out.has(name)) out.set(name, m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : (m[3] ?? ''));
    }
    if (bearer) break;
  }
  return out;
}
