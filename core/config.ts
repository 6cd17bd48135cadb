import { resolve } from 'node:path';
import { z } from 'zod';
import { ContinuityError } from './errors.ts';

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
 * - `CONTINUITY_RETENTION_DAYS`: event TTL in days (default 90; 0 keeps events forever).
 * - `CONTINUITY_MCP_PATHS`: comma-separated MCP endpoint paths for proxy inference
 *   (default: inferred from requests that carry `Mcp-Session-Id`/`Mcp-Protocol-Version`).
 * - `CONTINUITY_REMINT_WINDOW_S`: window for inferred re-mints (default 10 s).
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
    .regex(/^[0-9a-fA-F]{32,}$/, 'at least 32 hex characters')
    .optional(),
  retentionDays: z.coerce.number().int().min(0).max(36_500).default(90),
  mcpPaths: z.array(z.string().startsWith('/')).default([]),
  remintWindowS: z.coerce.number().positive().max(3600).default(10),
});

export type Config = Readonly<z.infer<typeof ConfigSchema>>;

/** Flags that override the environment; `undefined` means "not given". */
export interface ConfigFlags {
  dataDir?: string | undefined;
  remintWindowS?: number | string | undefined;
  mcpPaths?: string[] | undefined;
}

/**
 * Builds the frozen {@link Config}.
 * @throws ContinuityError `CONT_ERR_CONFIG` naming each bad variable or flag.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, flags: ConfigFlags = {}): Config {
  const raw = {
    dataDir: resolve(flags.dataDir ?? env.CONTINUITY_DATA_DIR ?? './.continuity'),
    clickhouse: env.CLICKHOUSE_URL
      ? {
          url: env.CLICKHOUSE_URL,
          username: env.CLICKHOUSE_USER,
          password: env.CLICKHOUSE_PASSWORD,
          database: env.CLICKHOUSE_DATABASE,
        }
      : undefined,
    hashKeyHex: env.CONTINUITY_HASH_KEY || undefined,
    retentionDays: env.CONTINUITY_RETENTION_DAYS,
    mcpPaths:
      flags.mcpPaths ??
      (env.CONTINUITY_MCP_PATHS ? env.CONTINUITY_MCP_PATHS.split(',').map((p) => p.trim()).filter(Boolean) : undefined),
    remintWindowS: flags.remintWindowS ?? env.CONTINUITY_REMINT_WINDOW_S,
  };
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const names: Record<string, string> = {
      dataDir: 'CONTINUITY_DATA_DIR/--data-dir',
      clickhouse: 'CLICKHOUSE_*',
      hashKeyHex: 'CONTINUITY_HASH_KEY',
      retentionDays: 'CONTINUITY_RETENTION_DAYS',
      mcpPaths: 'CONTINUITY_MCP_PATHS',
      remintWindowS: 'CONTINUITY_REMINT_WINDOW_S/--remint-window',
    };
    const issues = parsed.error.issues.map((i) => `${names[String(i.path[0])] ?? i.path.join('.')}: ${i.message}`);
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
