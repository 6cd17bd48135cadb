/**
 * Writes a synthetic Caddy v2 JSON access log for the import benchmark.
 *
 * The lines copy the shapes of `test/fixtures/captures/` (Caddy 2.6 in front of a
 * Streamable HTTP MCP server, SDK 1.32 client): `initialize` answered 200 with
 * `Mcp-Session-Id` in `resp_headers`, `notifications/initialized` 202, a long GET SSE
 * stream, tool calls answered 200 as SSE, 401 challenges (with and without `error=`),
 * 502s Caddy produced itself during a restart gap (`resp_headers` holds only `Server`),
 * then 404 refused misses for the sessions the restart lost, and DELETEs. Many sessions
 * are interleaved, header sets come in a shuffled order (Go map order is random), and
 * `Authorization` is redacted as `[]` or `["REDACTED"]`.
 *
 * Deterministic for a given `seed` and `startTs`. Usage:
 *   tsx bench/generate-caddy.ts [lines=1000000] [out=bench/out/caddy-access-<lines>.log]
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prng } from './prng.ts';

/** Options of {@link generateCaddyAccessLog}. */
export interface GenerateOptions {
  /** Number of lines to write (default 1,000,000). */
  lines?: number;
  /** Output path; parent directories are created. */
  path: string;
  /** PRNG seed (default 1). */
  seed?: number;
  /** Time of the first line, seconds since the epoch (default: two days ago, at 00:00 UTC). */
  startTs?: number;
}

/** What {@link generateCaddyAccessLog} wrote. */
export interface GenerateResult {
  path: string;
  lines: number;
  bytes: number;
  /** Lines by HTTP status. */
  byStatus: Record<string, number>;
}

const USER_AGENTS = [
  'node',
  'node',
  'claude-code/1.0.43',
  'python-httpx/0.28.1',
  'openai-mcp/1.0.0',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
];
const ORIGINS = ['https://claude.ai', 'https://chatgpt.com', 'http://localhost:6274'];

type Step = 'init' | 'initialized' | 'sse' | 'call' | 'delete';

interface Session {
  id: string;
  ua: string;
  origin: string | undefined;
  auth: 'none' | 'empty' | 'redacted';
  ip: string;
  port: number;
  /** Steps still to send; `call` repeats. */
  steps: Step[];
  /** The server lost the session in a restart: later requests get 404. */
  lost: boolean;
  /** Number of 401s still to answer before the first success. */
  challenges: number;
}

/**
 * Generates the log. Resolves when the file is closed.
 * @throws the file system error when `path` cannot be written.
 */
export async function generateCaddyAccessLog(options: GenerateOptions): Promise<GenerateResult> {
  const total = options.lines ?? 1_000_000;
  const rand = prng(options.seed ?? 1);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const hex = (n: number): string => {
    let s = '';
    for (let i = 0; i < n; i++) s += Math.floor(rand() * 16).toString(16);
    return s;
  };
  const uuid = (): string => `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
  const shuffle = <T>(xs: T[]): T[] => {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [xs[i], xs[j]] = [xs[j]!, xs[i]!];
    }
    return xs;
  };
  const startTs = options.startTs ?? Math.floor(Date.now() / 86_400_000 - 2) * 86_400;

  await mkdir(dirname(options.path), { recursive: true });
  const out = createWriteStream(options.path, { highWaterMark: 1 << 20 });
  const byStatus: Record<string, number> = {};
  let bytes = 0;
  let chunk = '';
  const emit = async (line: string): Promise<void> => {
    chunk += line + '\n';
    if (chunk.length >= 1 << 20) {
      bytes += Buffer.byteLength(chunk);
      if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      chunk = '';
    }
  };

  const newSession = (): Session => {
    const ua = pick(USER_AGENTS);
    const calls = 3 + Math.floor(rand() * 40);
    const steps: Step[] = ['init', 'initialized', 'sse', ...Array<Step>(calls).fill('call'), 'delete'];
    const authRoll = rand();
    return {
      id: uuid(),
      ua,
      origin: ua.startsWith('Mozilla') ? pick(ORIGINS) : undefined,
      auth: authRoll < 0.5 ? 'none' : authRoll < 0.85 ? 'empty' : 'redacted',
      ip: `10.${Math.floor(rand() * 4)}.${Math.floor(rand() * 256)}.${1 + Math.floor(rand() * 254)}`,
      port: 1024 + Math.floor(rand() * 64_000),
      steps,
      lost: false,
      challenges: authRoll >= 0.5 && rand() < 0.3 ? 1 : 0,
    };
  };

  const live: Session[] = Array.from({ length: 256 }, newSession);
  let ts = startTs;
  // A restart every ~150k lines: ~3 s of proxy-generated 502s, after which every
  // session open at the time is unknown to the new process (404 refused misses).
  let downUntil = -1;
  let nextRestart = startTs + 120 + rand() * 60;

  for (let n = 0; n < total; n++) {
    ts += rand() * 0.0012;
    if (ts >= nextRestart && downUntil < 0) {
      downUntil = ts + 3 + rand() * 0.6;
      for (const s of live) if (s.steps[0] !== 'init') s.lost = true;
    }
    if (downUntil > 0 && ts > downUntil) {
      downUntil = -1;
      nextRestart = ts + 120 + rand() * 60;
    }
    const i = Math.floor(rand() * live.length);
    const s = live[i]!;
    const step = s.steps[0]!;
    s.steps.shift();
    if (s.port > 60_000 || rand() < 0.05) s.port = 1024 + Math.floor(rand() * 64_000);

    const reqHeaders: Array<[string, string[]]> = [
      ['Accept', [step === 'sse' ? 'text/event-stream' : 'application/json, text/event-stream']],
      ['Accept-Encoding', ['gzip, deflate']],
      ['Accept-Language', ['*']],
      ['Sec-Fetch-Mode', ['cors']],
      ['User-Agent', [s.ua]],
      ['Connection', ['keep-alive']],
    ];
    const method = step === 'sse' ? 'GET' : step === 'delete' ? 'DELETE' : 'POST';
    if (method === 'POST') {
      reqHeaders.push(['Content-Type', ['application/json']]);
      reqHeaders.push(['Content-Length', [String(40 + Math.floor(rand() * 200))]]);
    }
    if (step !== 'init') {
      reqHeaders.push(['Mcp-Session-Id', [s.id]]);
      reqHeaders.push(['Mcp-Protocol-Version', ['2025-11-25']]);
    }
    if (s.auth !== 'none') reqHeaders.push(['Authorization', s.auth === 'empty' ? [] : ['REDACTED']]);
    if (s.origin) reqHeaders.push(['Origin', [s.origin]]);

    const date = new Date(Math.floor(ts * 1000)).toUTCString();
    let status: number;
    let duration: number;
    let size: number;
    let resp: Array<[string, string[]]>;
    if (downUntil > 0) {
      // The client retries the same request later: the step stays due.
      s.steps.unshift(step);
      status = 502;
      duration = 0.0002 + rand() * 0.0008;
      size = 0;
      resp = [['Server', ['Caddy']]];
    } else if (s.challenges > 0 && step === 'init') {
      s.challenges--;
      s.steps.unshift('init');
      status = 401;
      duration = 0.001 + rand() * 0.006;
      size = 25;
      const challenge =
        s.auth === 'none'
          ? 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
          : 'Bearer error="invalid_token", error_description="The access token is invalid"';
      resp = [['Server', ['Caddy']], ['Content-Type', ['application/json']], ['Www-Authenticate', [challenge]], ['Date', [date]]];
    } else if (s.lost && step !== 'init') {
      status = 404;
      duration = 0.001 + rand() * 0.005;
      size = 81;
      resp = [['Server', ['Caddy']], ['Date', [date]], ['Content-Type', ['application/json']]];
    } else if (step === 'initialized') {
      status = 202;
      duration = 0.002 + rand() * 0.003;
      size = 0;
      resp = [['Server', ['Caddy']], ['Date', [date]]];
    } else if (step === 'delete') {
      status = 200;
      duration = 0.001 + rand() * 0.002;
      size = 0;
      resp = [['Server', ['Caddy']], ['Date', [date]]];
    } else {
      status = 200;
      duration = step === 'sse' ? 1 + rand() * 30 : 0.002 + rand() * 0.03;
      size = step === 'sse' ? 0 : 100 + Math.floor(rand() * 2000);
      resp = [
        ['Date', [date]],
        ['Cache-Control', ['no-cache, no-transform']],
        ['Content-Type', ['text/event-stream']],
        ['Mcp-Session-Id', [s.id]],
        ['Server', ['Caddy']],
        ['X-Accel-Buffering', ['no']],
      ];
      if (size > 0) resp.push(['Content-Length', [String(size)]]);
    }
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    // A lost session keeps sending its dead id (the SDK client never re-initializes),
    // but not forever: the chat gives up after some refusals.
    if (s.steps.length === 0 || (status === 404 && rand() < 0.1)) live[i] = newSession();
    const entry = {
      level: status >= 400 ? 'error' : 'info',
      ts: Number(ts.toFixed(7)),
      logger: 'http.log.access.log0',
      msg: 'handled request',
      request: {
        remote_ip: s.ip,
        remote_port: String(s.port),
        proto: 'HTTP/1.1',
        method,
        host: 'mcp.example.com',
        uri: rand() < 0.02 ? '/mcp?session=debug' : '/mcp',
        headers: Object.fromEntries(shuffle(reqHeaders)),
      },
      user_id: s.auth === 'none' || status === 401 ? '' : `user-${s.ip}`,
      duration: Number(duration.toFixed(9)),
      size,
      status,
      resp_headers: Object.fromEntries(shuffle(resp)),
    };
    await emit(JSON.stringify(entry));
  }
  bytes += Buffer.byteLength(chunk);
  out.write(chunk);
  await new Promise<void>((resolveEnd, reject) => {
    out.once('error', reject);
    out.end(() => resolveEnd());
  });
  return { path: options.path, lines: total, bytes, byStatus };
}

/** The default output path for `lines` lines: `bench/out/caddy-access-<lines>.log`. */
export function defaultBenchLogPath(lines: number): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), 'out', `caddy-access-${lines}.log`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const lines = Number(process.argv[2] ?? 1_000_000);
  if (!Number.isInteger(lines) || lines <= 0) {
    console.error('usage: tsx bench/generate-caddy.ts [lines] [out]');
    process.exit(2);
  }
  const path = resolve(process.argv[3] ?? defaultBenchLogPath(lines));
  const result = await generateCaddyAccessLog({ lines, path });
  console.log(JSON.stringify(result));
}
