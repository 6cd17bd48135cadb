import { resolve } from 'node:path';
import { z } from 'zod';
import { ContinuityError } from './errors.ts';

/** A Kafka topic name (the broker's own rule: 1–249 of `[A-Za-z0-9._-]`, not `.` or `..`). */
/**
 * The longest retention CONTINUITY_RETENTION_DAYS takes, days (about 54 years). The
 * tables' TTL, `toDateTime(ts) + days`, is a DateTime, whose range ends on 2106-02-07
 * (ClickHouse "DateTime"); a sum past it wraps around to the 1970s, which expires the
 * row. 20,000 days from now stays inside it until the 2050s; 0 keeps events for ever.
 */
export const MAX_RETENTION_DAYS = 20_000;

const KafkaTopicName = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,249}$/, '1–249 characters of A-Z a-z 0-9 . _ -')
  .refine((t) => t !== '.' && t !== '..', 'not . or ..');

/**
 * Configuration, parsed once from the environment and command-line flags by
 * {@link loadConfig}, frozen, and passed down. Nothing else reads `process.env`.
 *
 * Environment variables (flags win over them):
 * - `CONTINUITY_DATA_DIR` / `--data-dir`: embedded store directory (default `./.continuity`).
 * - `CLICKHOUSE_URL`, `CLICKHOUSE_USER`, `CLICKHOUSE_PASSWORD`, `CLICKHOUSE_DATABASE`:
 *   use a ClickHouse server instead of the embedded engine.
 * - `CONTINUITY_HASH_KEY`: deployment key for keyed hashes, hex (≥ 32 hex chars); when
 *   unset the embedded mode keeps one in `<data-dir>/hash.key`.
 * - `CONTINUITY_RETENTION_DAYS`: event TTL in days (0 keeps events forever). Set, it changes the
 *   store's TTL when the store opens; unset, the store keeps the TTL it has (90 days when created),
 *   so a command run without it never shortens a retention set before. The write paths read the
 *   store's TTL, not this value (store/retention.ts).
 * - `CONTINUITY_MCP_PATHS`: comma-separated MCP endpoint paths for proxy inference
 *   (default: inferred from requests that carry `Mcp-Session-Id`/`Mcp-Protocol-Version`).
 * - `CONTINUITY_REMINT_WINDOW_S`: window for inferred re-mints (default 10 s).
 * - `CONTINUITY_INGEST_TOKEN` / `--token`: bearer token (≥ 16 characters of RFC 6750 §2.1 b64token: letters, digits, `-._~+/`, then `=`) the ingest
 *   gateway (`continuity serve`, `continuity gateway`) requires; `serve` requires it on
 *   its read API too (default: none, for a loopback-only server).
 * - `KAFKA_BROKERS`: comma-separated `host:port` bootstrap list; when set, ingest runs
 *   through Kafka (`continuity gateway` → topic → `continuity consumer`), otherwise
 *   embedded. With it: `KAFKA_TOPIC` (default `mcp-continuity-events`),
 *   `KAFKA_DLQ_TOPIC` (default `<topic>.dlq`), `KAFKA_PARTITIONS` (partitions the topic
 *   is created with, default 6), `KAFKA_GROUP` (consumer group, default
 *   `mcp-continuity-writer`), `KAFKA_MAX_MESSAGE_BYTES` (larger messages are
 *   dead-lettered as `too_large`, default 1 MiB).
 */
export const ConfigSchema = z.object({
  dataDir: z.string().min(1),
  clickhouse: z
    .object({
      url: z.url({ protocol: /^https?$/ }),
      username: z.string().default('default'),
      password: z.string().default(''),
      database: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a plain identifier').default('default'),
    })
    .optional(),
  hashKeyHex: z
    .string()
    .regex(/^(?:[0-9a-fA-F]{2}){16,}$/, 'an even number of hex characters, at least 32 (16 bytes: an odd last digit would be dropped silently)')
    .optional(),
  // decimal digits only: z.coerce took 0x10 as 16 and 1e1 as 10 (found by a break-it pass),
  // and a retention read wrong drops events. At most MAX_RETENTION_DAYS: the TTL is a
  // DateTime, which ends in 2106, and past that `ts + days` wrapped to the 1970s, so 30000
  // expired every row at the next merge (a break-it pass).
  retentionDays: z
    .union([z.number(), z.string().regex(/^\d{1,6}$/).transform(Number)], { error: `whole days as decimal digits, 0 to ${MAX_RETENTION_DAYS} (0 keeps events for ever)` })
    .pipe(z.number().int().min(0).max(MAX_RETENTION_DAYS, `at most ${MAX_RETENTION_DAYS} days (the store's times end in 2106); 0 keeps events for ever`))
    .optional(),
  mcpPaths: z.array(z.string().startsWith('/')).default([]),
  remintWindowS: z.coerce.number({ error: 'a number of seconds' }).positive('more than 0 seconds').max(86_400, 'at most 86400 seconds (a day)').default(10),
  // RFC 6750 §2.1's b64token, the only token a client can send as `Bearer <token>`: a
  // token with a trailing CR or space (read from a CRLF file) or non-ASCII letters was
  // accepted, and every request then got 401, the server's own `canary --url` too (a
  // break-it pass)
  ingestToken: z
    .string()
    .min(16, 'at least 16 characters')
    .max(512)
    .regex(/^[A-Za-z0-9._~+/-]+=*$/, "letters, digits and - . _ ~ + / (then = padding) only, as a Bearer token is sent (RFC 6750 §2.1); no spaces or line ends: check a token read from a file for a trailing carriage return (\\r) or newline")
    .optional(),
  kafka: z
    .object({
      brokers: z.array(z.string().regex(/^[^\s:,]+:\d{1,5}$/, 'host:port')).min(1),
      topic: KafkaTopicName.default('mcp-continuity-events'),
      dlqTopic: KafkaTopicName.optional(),
      partitions: z.coerce.number({ error: 'a whole number' }).int('a whole number').min(1, 'at least 1').max(10_000, 'at most 10000').default(6),
      group: z.string().min(1).max(249).default('mcp-continuity-writer'),
      maxMessageBytes: z.coerce.number({ error: 'a whole number of bytes' }).int('a whole number of bytes').min(1024, 'at least 1024 bytes').max(1 << 30, 'at most 1073741824 bytes (1 GiB)').default(1 << 20),
    })
    .transform((k) => ({ ...k, dlqTopic: k.dlqTopic ?? `${k.topic}.dlq` }))
    .optional(),
});

export type Config = Readonly<z.infer<typeof ConfigSchema>>;

/** The Kafka part of {@link Config} (present when `KAFKA_BROKERS` is set). */
export type KafkaConfig = Readonly<NonNullable<z.infer<typeof ConfigSchema>['kafka']>>;

/** Flags that override the environment; `undefined` means "not given". */
export interface ConfigFlags {
  dataDir?: string | undefined;
  remintWindowS?: number | string | undefined;
  mcpPaths?: string[] | undefined;
  ingestToken?: string | undefined;
}

/**
 * Builds the frozen {@link Config}.
 * @throws ContinuityError `CONT_ERR_CONFIG` naming each bad variable or flag.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = {}): Config {
  const raw = {
    // an empty value is unset, as for every variable (an empty path would be the current directory)
    dataDir: resolve(flags.dataDir || env.CONTINUITY_DATA_DIR || './.continuity'),
    clickhouse: env.CLICKHOUSE_URL
      ? {
          url: env.CLICKHOUSE_URL,
          username: env.CLICKHOUSE_USER,
          password: env.CLICKHOUSE_PASSWORD,
          database: env.CLICKHOUSE_DATABASE,
        }
      : undefined,
    hashKeyHex: env.CONTINUITY_HASH_KEY || undefined,
    retentionDays: env.CONTINUITY_RETENTION_DAYS || undefined,
    mcpPaths:
      flags.mcpPaths ??
      (env.CONTINUITY_MCP_PATHS ? env.CONTINUITY_MCP_PATHS.split(',').map((p) => p.trim()).filter(Boolean) : undefined),
    remintWindowS: flags.remintWindowS ?? (env.CONTINUITY_REMINT_WINDOW_S || undefined),
    ingestToken: flags.ingestToken ?? (env.CONTINUITY_INGEST_TOKEN || undefined),
    kafka: env.KAFKA_BROKERS?.trim()
      ? {
          brokers: env.KAFKA_BROKERS.split(',').map((b) => b.trim()).filter(Boolean),
          topic: env.KAFKA_TOPIC || undefined,
          dlqTopic: env.KAFKA_DLQ_TOPIC || undefined,
          partitions: env.KAFKA_PARTITIONS || undefined,
          group: env.KAFKA_GROUP || undefined,
          maxMessageBytes: env.KAFKA_MAX_MESSAGE_BYTES || undefined,
        }
      : undefined,
  };
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const names: Record<string, string> = {
      dataDir: 'CONTINUITY_DATA_DIR/--data-dir',
      clickhouse: 'CLICKHOUSE_*',
      hashKeyHex: 'CONTINUITY_HASH_KEY',
      retentionDays: 'CONTINUITY_RETENTION_DAYS',
      mcpPaths: 'CONTINUITY_MCP_PATHS',
      remintWindowS: 'CONTINUITY_REMINT_WINDOW_S',
      ingestToken: 'CONTINUITY_INGEST_TOKEN/--token',
    };
    const kafkaNames: Record<string, string> = {
      brokers: 'KAFKA_BROKERS',
      topic: 'KAFKA_TOPIC',
      dlqTopic: 'KAFKA_DLQ_TOPIC',
      partitions: 'KAFKA_PARTITIONS',
      group: 'KAFKA_GROUP',
      maxMessageBytes: 'KAFKA_MAX_MESSAGE_BYTES',
    };
    const name = (path: PropertyKey[]): string =>
      path[0] === 'kafka' ? (kafkaNames[String(path[1])] ?? 'KAFKA_*') : (names[String(path[0])] ?? path.join('.'));
    const issues = parsed.error.issues.map((i) => `${name(i.path)}: ${i.message}`);
    throw new ContinuityError('CONT_ERR_CONFIG', issues.join('; '), { details: { issues } });
  }
  return deepFreeze(parsed.data);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
