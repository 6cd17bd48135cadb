import { describe, expect, it } from 'vitest';
import { isAuthChallenge, classifyChallenge, parseBearerParams } from './challenge.ts';

describe('classifyChallenge (RFC 6750 §3.1)', () => {
  it('a 401 without error= and without a credential is missing_credential', () => {
    const c = classifyChallenge(401, ['Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"'], false);
    expect(c).toMatchObject({ challenge_class: 'missing_credential', has_resource_metadata: true });
  });
  it('error="invalid_token" wins over the status', () => {
    const c = classifyChallenge(401, ['Bearer error="invalid_token", error_description="The access token is invalid"'], true);
    expect(c.challenge_class).toBe('invalid_token');
    expect(c.error_description).toBe('The access token is invalid');
  });
  it('an invalid_token whose description says it expired is expired_token', () => {
    expect(classifyChallenge(401, ['Bearer error="invalid_token", error_description="The access token expired"'], true).challenge_class).toBe(
      'expired_token',
    );
  });
  it('insufficient_scope carries the scope', () => {
    const c = classifyChallenge(403, ['Bearer error="insufficient_scope", scope="tools:call files:read"'], true);
    expect(c).toMatchObject({ challenge_class: 'insufficient_scope', scope: 'tools:call files:read' });
  });
  it('with a credential and no error=, 401 is invalid_token and 403 insufficient_scope', () => {
    expect(classifyChallenge(401, [], true).challenge_class).toBe('invalid_token');
    expect(classifyChallenge(403, [], true).challenge_class).toBe('insufficient_scope');
  });
  it('invalid_token without any credential is the first handshake (the SDK guard sends error= anyway)', () => {
    expect(classifyChallenge(401, ['Bearer error="invalid_token", error_description="Missing Authorization header"'], false).challenge_class).toBe(
      'missing_credential',
    );
  });
  it('unknown error values are other', () => {
    expect(classifyChallenge(401, ['Bearer error=server_busy'], true).challenge_class).toBe('other');
  });
  it('parses token and quoted-string params with escapes, Bearer among several challenges', () => {
    const p = parseBearerParams(['Basic realm="x", Bearer realm="a \\"b\\"", error=invalid_request']);
    expect(p.get('realm')).toBe('a "b"');
    expect(p.get('error')).toBe('invalid_request');
  });
});

describe('isAuthChallenge', () => {
  it('is every 401, and a 403 only with WWW-Authenticate (RFC 9110 §15.5.2, RFC 6750 §3.1)', () => {
    expect(isAuthChallenge(401, [])).toBe(true);
    expect(isAuthChallenge(403, ['Bearer error="insufficient_scope", scope="tools:call"'])).toBe(true);
    expect(isAuthChallenge(403, [])).toBe(false);
    expect(isAuthChallenge(403, ['  '])).toBe(false);
    expect(isAuthChallenge(404, ['Bearer'])).toBe(false);
  });
});
