/**
 * HTTP request rules the ingest gateway (ingest/gateway/app.ts) and the read API
 * (api/routes.ts) share, kept free of fastify so both apply them the same way.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ContinuityError } from './errors.ts';

/**
 * The media type of a `Content-Type` value, `type/subtype` lowercased with its
 * parameters dropped (`Application/JSON; charset=UTF-8` → `application/json`);
 * RFC 9110 §8.3.1: type and subtype are case-insensitive. `''` when absent.
 */
export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/**
 * Refuses a request whose body is of a media type the route does not take.
 * A request without a body passes (the route answers for the missing body); a
 * body without a `Content-Type` is refused like any other type.
 * @param accepted lowercase media types the route parses, e.g. `['application/json']`.
 * @throws ContinuityError `CONT_ERR_UNSUPPORTED_MEDIA` (415, RFC 9110 §15.5.16)
 *   naming the accepted types in its message and in `details.accepted`, with the
 *   type sent in `details.contentType`.
 */
export function assertMediaType(headers: IncomingHttpHeaders, accepted: readonly string[]): void {
  const type = mediaTypeOf(headers['content-type']);
  // RFC 9112 §6.3: a request has a body when it has Transfer-Encoding or a non-zero Content-Length.
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
  if (accepted.includes(type) || (type === '' && !hasBody)) return;
  throw new ContinuityError('CONT_ERR_UNSUPPORTED_MEDIA', `${type || 'a body without Content-Type'}; this route accepts ${accepted.join(', ')}`, {
    details: { contentType: headers['content-type'] ?? null, accepted: [...accepted] },
  });
}

/**
 * Content codings a request body may be sent in (`Content-Encoding`); the body is
 * decoded before it is parsed (RFC 9110 §8.4). Any other coding is refused with
 * {@link unsupportedContentCodingError}.
 */
export const REQUEST_CONTENT_CODINGS = ['gzip', 'deflate'] as const;

/**
 * The answer to a body in a content coding the server does not decode: RFC 9110
 * §15.5.16 makes that a 415 as for an unsupported media type ("due to a content
 * coding that the origin server does not support"), so it shares that code, with the
 * coding named in the message and in `details`.
 * @param contentEncoding the `Content-Encoding` value sent, as sent.
 * @param accepted the codings the server decodes (default {@link REQUEST_CONTENT_CODINGS}).
 * @returns ContinuityError `CONT_ERR_UNSUPPORTED_MEDIA` (415) with
 *   `details: { contentEncoding, acceptedEncodings }`.
 */
export function unsupportedContentCodingError(contentEncoding: string, accepted: readonly string[] = REQUEST_CONTENT_CODINGS): ContinuityError {
  return new ContinuityError(
    'CONT_ERR_UNSUPPORTED_MEDIA',
    `Content-Encoding ${contentEncoding} is not decoded here; send the body in ${accepted.join(', ')} or unencoded`,
    { details: { contentEncoding, acceptedEncodings: [...accepted] } },
  );
}

/** The fields of an error the HTTP framework or one of its plugins raises (fastify's `FST_ERR_*`). */
export interface FrameworkError {
  readonly code?: string;
  readonly statusCode?: number;
  readonly message: string;
}

/**
 * Turns an error the HTTP framework raised while reading a request (before or
 * while parsing its body) into the coded error both servers answer with, so the
 * ingest routes and the read API give the same status and code for the same fault:
 * - a body over the limit (`FST_ERR_CTP_BODY_TOO_LARGE`, or any 413) →
 *   `CONT_ERR_BODY_TOO_LARGE`, 413 Content Too Large (RFC 9110 §15.5.14), with
 *   `details.limitBytes`; the limit counts decoded bytes, so a gzip bomb is refused too;
 * - any other 415 → `CONT_ERR_UNSUPPORTED_MEDIA` (RFC 9110 §15.5.16);
 * - any other 4xx (malformed JSON, a bad Content-Length, a body that does not
 *   inflate) → `CONT_ERR_BAD_REQUEST`, 400.
 * @param bodyLimitBytes the route's body limit (fastify `request.routeOptions.bodyLimit`), bytes.
 * @returns the coded error, or undefined for a server error (5xx or no status):
 *   the caller logs it and answers 500.
 */
export function codedRequestError(err: FrameworkError, bodyLimitBytes: number): ContinuityError | undefined {
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
    return new ContinuityError('CONT_ERR_BODY_TOO_LARGE', `limit ${bodyLimitBytes} bytes`, { details: { limitBytes: bodyLimitBytes } });
  }
  if (err.statusCode === 415) return new ContinuityError('CONT_ERR_UNSUPPORTED_MEDIA', err.message);
  if (err.statusCode !== undefined && err.statusCode < 500) return new ContinuityError('CONT_ERR_BAD_REQUEST', err.message);
  return undefined;
}

/**
 * Builds the check of an `Authorization` value against the one accepted bearer
 * token: credentials = auth-scheme 1*SP token (RFC 9110 §11.6.2), the scheme
 * `Bearer` in any case (RFC 9110 §11.1: auth schemes are case-insensitive; RFC
 * 6750 §2.1), the token byte for byte (it is case-sensitive).
 * The token is compared in constant time over SHA-256 digests, so the time taken
 * tells neither how much of it matched nor its length.
 * @returns a function that is true when the header (the raw value, or undefined when absent) carries the token.
 */
export function createBearerCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = sha256(token);
  return (authorization) => {
    const m = /^(\S+) +(.*)$/s.exec(authorization ?? '');
    const schemeOk = m !== null && m[1]!.toLowerCase() === 'bearer';
    // Compared even when the scheme is wrong, so the scheme alone does not shorten the time.
    const tokenOk = timingSafeEqual(sha256(m?.[2] ?? ''), expected);
    return schemeOk && tokenOk;
  };
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
