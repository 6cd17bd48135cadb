#!/usr/bin/env node
// Entry point for the `continuity` command: runs the TypeScript CLI through tsx's
// ESM loader so the package needs no build step.
//
// Standard input ('-' as an input path) reaches the CLI on file descriptor 3, not 0:
// the embedded engine (chDB, like clickhouse-local) treats data waiting on its
// process's stdin as INSERT input, refuses every INSERT while there is some ("both
// inlined and external data"), and could swallow the log itself. So with '-' this
// launcher runs the CLI in a child whose stdin is /dev/null and pipes its own stdin
// to the child's fd 3 (CONTINUITY_STDIN_FD); any other command runs with /dev/null as
// its stdin (below).
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { isatty } from 'node:tty';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
if (args.includes('-') && process.env.CONTINUITY_STDIN_FD === undefined) {
  // (in a process group of its own: a Ctrl-C at a terminal signals the whole foreground
  // group, and the child would get it twice, from the terminal and forwarded, and take
  // the second for "exit now" instead of stopping the import cleanly)
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
    env: { ...process.env, CONTINUITY_STDIN_FD: '3' },
    detached: true,
  });
  process.stdin.pipe(child.stdio[3]);
  // A reader that stops early (an error) closes its end; that is not our error.
  child.stdio[3].on('error', () => {});
  const forward = (signal) => child.kill(signal);
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, forward);
  child.on('exit', (code, signal) => {
    if (signal) {
      // End the same way (exit status 128 + n): with our forwarding handler still
      // installed the signal would be swallowed and the launcher would exit 0.
      for (const s of signals) process.off(s, forward);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
} else {
  // A command that does not read '-' gets /dev/null as fd 0 (unless fd 0 is a terminal):
  // the engine would otherwise take data waiting there, from a shell loop's pipe
  // (`… | while read f; do continuity import caddy "$f"; done`) or an `echo x |`, as
  // INSERT input, refuse the write, and swallow the rest of the loop's input (found by a
  // newcomer pass). POSIX open() takes the lowest free descriptor, so closing 0 first
  // puts /dev/null there; nothing has opened process.stdin yet.
  if (!isatty(0)) {
    try {
      closeSync(0);
    } catch {
      // fd 0 was not open (`<&-`): open() below takes it all the same
    }
    const fd = openSync('/dev/null', 'r');
    if (fd !== 0) closeSync(fd);
  }
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
