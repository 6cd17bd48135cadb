// scripts/kafka.sh (and `continuity dev kafka`, which runs it) when this project's broker is
// not running but another process answers on its port: "in use … by another process",
// exit 4, never "stopped". No broker needed: a plain TCP listener holds the port, and the
// script gets a data directory of its own (never the repository's .kafka).
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePortPair, repoRoot, tempDir } from './faults/support.ts';

const execFileAsync = promisify(execFile);
let listener: Server;
let port: number;
const dataDir = tempDir('kafka-script');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end and returns its exit code and output, whatever the code. */
async function run(file: string, args: string[], env: Record<string, string>): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileAsync(file, args, {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

const script = (action: string, env: Record<string, string>) => run('bash', ['scripts/kafka.sh', action], env);

beforeAll(async () => {
  listener = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', resolve);
  });
  port = (listener.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => listener?.close(resolve));
  rmSync(dataDir, { recursive: true, force: true });
});

describe('scripts/kafka.sh when another process holds the port', () => {
  const inUse = () => new RegExp(`^in use 127\\.0\\.0\\.1:${port} .*by another process.*not the broker of ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, which is not running`);

  it('status says the port is in use by another process and exits 4', async () => {
    const res = await script('status', { KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir });
    expect(res.code).toBe(4);
    expect(res.stdout).toMatch(inUse());
    expect(res.stdout).toMatch(/set KAFKA_PORT to a free port/);
    expect(res.stdout).not.toMatch(/^stopped/m);
  });

  it('start refuses with the same message and exit 4, before fetching or starting anything', async () => {
    const res = await script('start', { KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir });
    expect(res.code).toBe(4);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(new RegExp(`error: cannot start: in use 127\\.0\\.0\\.1:${port} `));
    expect(res.stderr).not.toMatch(/starting Kafka|resolving Kafka/);
  });

  it('continuity dev kafka status passes the message and the exit code through', async () => {
    const res = await run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'dev', 'kafka', 'status'], { KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir });
    expect(res.code).toBe(4);
    expect(res.stdout).toMatch(inUse());
  });

  it('continuity dev kafka refuses an unknown action with a coded error (exit 2)', async () => {
    const res = await run(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'dev', 'kafka', 'stat'], { KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/CONT_ERR_CONFIG: .*takes start, stop or status, got "stat"/);
  });

  it('status on free ports still says stopped, exit 3', async () => {
    const free = await freePortPair();
    const res = await script('status', { KAFKA_PORT: String(free), KAFKA_DATA_DIR: dataDir });
    expect(res).toMatchObject({ code: 3, stdout: `stopped 127.0.0.1:${free} (data ${dataDir})\n` });
  });
});
