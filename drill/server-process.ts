import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ContinuityError } from '../core/index.ts';
import { waitFor, waitForExit } from './wait.ts';

const SCRIPT = fileURLToPath(new URL('./mcp-server.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** One stdout line of drill/mcp-server.ts (see its header), with the time the drill read it. */
export interface ServerLine {
  ev: string;
  /** Epoch ms when the server wrote it. */
  t: number;
  n?: number;
  status?: number;
  finished?: boolean;
  method?: string;
  text?: string;
  boot_id?: string;
  pid?: number;
  counters?: Record<string, number>;
}

/** Options of {@link spawnMcpServer}. */
export interface McpServerProcessOptions {
  /** Boot number in the drill (1, 2, 3). */
  label: number;
  port: number;
  /** OTLP/HTTP logs URL of the drill's gateway. */
  otlpUrl: string;
  service: string;
  hashKeyHex: string;
  /** Start as a warm standby that binds the port only on {@link McpServerProcess.go}. */
  standby: boolean;
  /** Longest wait for the process to start (and, without standby, listen), ms (default 20 000). */
  startTimeoutMs?: number;
}

/** Parent-side handle of one drill/mcp-server.ts child process. */
export interface McpServerProcess {
  readonly label: number;
  readonly pid: number;
  /** Every line read so far, in order. */
  readonly lines: readonly ServerLine[];
  /** The `ready` line, once listening. */
  readonly ready: ServerLine | undefined;
  /** Binds the port (a standby process) and resolves with the `ready` line. */
  go(timeoutMs?: number): Promise<ServerLine>;
  /** Asks the collector to export everything emitted so far; resolves with the `flushed` line. */
  flush(timeoutMs?: number): Promise<ServerLine>;
  /** kill -9; resolves once the process and its output are gone, with the time of the kill (epoch ms). */
  kill9(): Promise<number>;
  /** SIGTERM (graceful: the collector drains, emits `shutdown` and flushes); SIGKILL after `timeoutMs`. @returns the time of the signal. */
  stop(timeoutMs?: number): Promise<number>;
  /** Request numbers (`x-drill-req`) the server received and had not answered, per its lines up to `uptoLine` (default: all). */
  openRequests(uptoLine?: number): number[];
  /** Kills the process if it is still running (cleanup on any path). */
  dispose(): void;
  /** The last lines of its standard error, for messages. */
  stderrTail(): string;
}

/**
 * Starts drill/mcp-server.ts as a child process (`node --import tsx`), so that the
 * drill can kill it for real. Resolves once it printed `standby` (with `standby`)
 * or `ready`.
 * @throws ContinuityError CONT_ERR_DRILL_SETUP when it exits or stays silent.
 */
export async function spawnMcpServer(options: McpServerProcessOptions): Promise<McpServerProcess> {
  const argv = ['--import', 'tsx', SCRIPT, '--port', String(options.port), '--otlp', options.otlpUrl, '--boot-label', String(options.label), '--service', options.service];
  if (options.standby) argv.push('--standby');
  const child: ChildProcess = spawn(process.execPath, argv, {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, CONTINUITY_HASH_KEY: options.hashKeyHex },
  });
  const lines: ServerLine[] = [];
  let stderr = '';
  let closed = false;
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      lines.push(JSON.parse(text) as ServerLine);
    } catch {
      stderr = (stderr + `\n(stdout) ${text}`).slice(-4000);
    }
  });
  child.once('close', () => (closed = true));
  // A write to a dead child's stdin must not crash the drill.
  child.stdin!.on('error', () => {});

  const tail = () => stderr.trim().split('\n').slice(-6).join(' | ');
  const find = (ev: string, from = 0) => lines.slice(from).find((l) => l.ev === ev);
  const expectLine = async (ev: string, from: number, timeoutMs: number, what: string): Promise<ServerLine> => {
    try {
      await waitFor(() => {
        if (find(ev, from)) return true;
        if (closed) throw new ContinuityError('CONT_ERR_DRILL_SETUP', `server ${options.label} exited while waiting for ${what}: ${tail()}`);
        return false;
      }, { timeoutMs, what: `server ${options.label}: ${what}`, intervalMs: 2 });
    } catch (err) {
      if (err instanceof ContinuityError && /exited/.test(err.message)) throw err;
      throw new ContinuityError('CONT_ERR_DRILL_SETUP', `${(err as Error).message}; stderr: ${tail()}`, { cause: err });
    }
    return find(ev, from)!;
  };

  const handle: McpServerProcess = {
    label: options.label,
    pid: child.pid!,
    lines,
    get ready() {
      return find('ready');
    },
    async go(timeoutMs = 10_000) {
      child.stdin!.write('go\n');
      return expectLine('ready', 0, timeoutMs, 'listening');
    },
    async flush(timeoutMs = 10_000) {
      const from = lines.length;
      child.stdin!.write('flush\n');
      return expectLine('flushed', from, timeoutMs, 'collector flush');
    },
    async kill9() {
      const at = Date.now();
      child.kill('SIGKILL');
      await waitFor(() => closed, { timeoutMs: 10_000, what: `server ${options.label} to die` });
      return at;
    },
    async stop(timeoutMs = 15_000) {
      const at = Date.now();
      child.kill('SIGTERM');
      if (!(await waitForExit(child, timeoutMs))) child.kill('SIGKILL');
      await waitFor(() => closed, { timeoutMs: 10_000, what: `server ${options.label} to exit` });
      return at;
    },
    openRequests(uptoLine = lines.length) {
      const open = new Set<number>();
      for (const l of lines.slice(0, uptoLine)) {
        if (l.ev === 'req' && l.n !== undefined) open.add(l.n);
        else if (l.ev === 'res' && l.n !== undefined) open.delete(l.n);
      }
      return [...open].sort((a, b) => a - b);
    },
    dispose() {
      if (!closed && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      child.stdin!.destroy();
    },
    stderrTail: tail,
  };
  try {
    await expectLine(options.standby ? 'standby' : 'ready', 0, options.startTimeoutMs ?? 20_000, options.standby ? 'standby' : 'listening');
  } catch (err) {
    handle.dispose();
    throw err;
  }
  return handle;
}
