import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { delimiter, join } from 'node:path';
import { ContinuityError } from '../core/index.ts';
import { waitFor, waitForExit } from './wait.ts';

/** Where Debian's `caddy` package installs the binary. */
const DEBIAN_CADDY = '/usr/bin/caddy';

/** The `caddy` binary on this machine (`/usr/bin/caddy`, else the first on `PATH`), or undefined. */
export function findCaddy(path: string | undefined = process.env.PATH): string | undefined {
  const candidates = [DEBIAN_CADDY, ...(path ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, 'caddy'))];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Returns the Caddy binary; when it is missing and `install` is true, installs
 * Debian's package first (`apt-get update`, then `apt-get install -y caddy`; needs
 * root, as on CI). Test setup passes `install: true`; the CLI does not.
 * @throws ContinuityError CONT_ERR_DRILL_SETUP when Caddy is missing (and could not be installed).
 */
export function ensureCaddy(options: { install: boolean }): string {
  const found = findCaddy();
  if (found) return found;
  if (!options.install) throw new ContinuityError('CONT_ERR_DRILL_SETUP', 'caddy is not installed (apt-get install -y caddy)');
  for (const argv of [['update', '-q'], ['install', '-y', '-q', 'caddy']]) {
    const r = spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...argv], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      encoding: 'utf8',
    });
    if (r.status !== 0) {
      throw new ContinuityError('CONT_ERR_DRILL_SETUP', `apt-get ${argv.join(' ')} failed (${r.status ?? r.signal}): ${tail(r.stderr ?? String(r.error ?? ''))}`);
    }
  }
  const installed = findCaddy();
  if (!installed) throw new ContinuityError('CONT_ERR_DRILL_SETUP', 'apt-get installed caddy but no caddy binary was found');
  return installed;
}

/** Options of {@link startCaddy}. */
export interface CaddyOptions {
  /** The caddy binary. */
  bin: string;
  /** Directory for the Caddyfile, the two logs, and Caddy's own state (HOME/XDG dirs point here). */
  dir: string;
  /** Loopback port Caddy listens on. */
  listenPort: number;
  /** Loopback port of the upstream MCP server. */
  upstreamPort: number;
  /** Longest wait for Caddy to listen, ms (default 15 000). */
  startTimeoutMs?: number;
}

/** A running Caddy. */
export interface CaddyProcess {
  readonly pid: number;
  /** `http://127.0.0.1:<listenPort>` */
  readonly url: string;
  /** JSON access log (one line per request, written when the response ends). */
  readonly accessLog: string;
  /** JSON error/runtime log (the default logger: dial failures, cut streams). */
  readonly errorLog: string;
  /** Stops Caddy gracefully (SIGTERM; SIGKILL after `timeoutMs`, default 5 000) and resolves once it exited. Idempotent. */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * The Caddyfile the drill runs: a loopback site with a JSON access log, the
 * default logger as a JSON error log, and `reverse_proxy` to the MCP server with
 * `flush_interval -1` (flush at once, as SSE needs; Caddy also does this by itself
 * for `text/event-stream`). No admin endpoint (so parallel drills do not collide on
 * :2019), no automatic HTTPS (Caddy saves its autosave.json under `dir`, whose XDG dirs the drill points there). Default proxy behaviour otherwise:
 * one dial, and a refused dial is answered 502 by Caddy itself.
 */
export function caddyfile(o: { dir: string; listenPort: number; upstreamPort: number }): string {
  return `{
	admin off
	auto_https off
	grace_period 2s
	log {
		output file ${join(o.dir, 'caddy-error.log')}
		format json
	}
}

http://127.0.0.1:${o.listenPort} {
	bind 127.0.0.1
	log {
		output file ${join(o.dir, 'caddy-access.log')}
		format json
	}
	reverse_proxy 127.0.0.1:${o.upstreamPort} {
		flush_interval -1
	}
}
`;
}

/**
 * Writes the Caddyfile and starts `caddy run`; resolves once Caddy accepts TCP
 * connections on the listen port (probed with a bare connect, so the access log
 * holds only the drill's requests).
 * @throws ContinuityError CONT_ERR_DRILL_SETUP when Caddy exits or does not listen in time (with its output).
 */
export async function startCaddy(options: CaddyOptions): Promise<CaddyProcess> {
  const config = join(options.dir, 'Caddyfile');
  writeFileSync(config, caddyfile(options));
  const child: ChildProcess = spawn(options.bin, ['run', '--config', config, '--adapter', 'caddyfile'], {
    cwd: options.dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: options.dir, XDG_DATA_HOME: options.dir, XDG_CONFIG_HOME: options.dir },
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  child.once('exit', () => (exited = true));
  const stop = async (timeoutMs = 5000) => {
    if (exited || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    if (!(await waitForExit(child, timeoutMs))) {
      child.kill('SIGKILL');
      await waitForExit(child, 5000);
    }
  };
  try {
    await waitFor(async () => {
      if (exited) throw new ContinuityError('CONT_ERR_DRILL_SETUP', `caddy exited at start: ${tail(output)}`);
      return canConnect(options.listenPort);
    }, { timeoutMs: options.startTimeoutMs ?? 15_000, what: `caddy listening on 127.0.0.1:${options.listenPort}` });
  } catch (err) {
    await stop(1000);
    if (err instanceof ContinuityError && err.code === 'CONT_ERR_DRILL_SETUP') throw err;
    throw new ContinuityError('CONT_ERR_DRILL_SETUP', `${(err as Error).message}: ${tail(output)}`, { cause: err });
  }
  return {
    pid: child.pid!,
    url: `http://127.0.0.1:${options.listenPort}`,
    accessLog: join(options.dir, 'caddy-access.log'),
    errorLog: join(options.dir, 'caddy-error.log'),
    stop,
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-8).join(' | ').slice(-1500);
}
