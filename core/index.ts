/** Cross-cutting pieces: configuration, coded errors, shared HTTP request rules, keyed hashing. */
export { loadConfig, ConfigSchema, MAX_RETENTION_DAYS } from './config.ts';
export type { Config, ConfigFlags, KafkaConfig } from './config.ts';
export { ContinuityError, ERROR_CODES, isContinuityError, renderErrorDocs } from './errors.ts';
export type { ErrorCode, ErrorSpec } from './errors.ts';
export {
  assertMediaType,
  CLOSE_GRACE_MS,
  closeWithin,
  trackConnections,
  answerClientError,
  answerRefusedRequests,
  missingHostError,
  badUrlError,
  codedRequestError,
  bearerChallenge,
  createBearerCheck,
  unauthorized,
  decodeUtf8Body,
  foreignHostError,
  isLoopbackHost,
  JsonBodyError,
  mediaTypeOf,
  parseJsonBody,
  REQUEST_CONTENT_CODINGS,
  REQUEST_TIMEOUT_MS,
  unsupportedContentCodingError,
} from './http.ts';
export type { FrameworkError } from './http.ts';
export { createKeyedHasher, ensureDeploymentKey, hasherForConfig, deploymentKeyWarning, loadOrCreateKeyFile } from './hash.ts';
export type { KeyedHasher } from './hash.ts';
export { retry } from './retry.ts';
export type { RetryOptions } from './retry.ts';
export { oneLine, visibleText } from './text.ts';
