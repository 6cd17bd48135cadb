/**
 * Resolves with the first SIGINT, SIGTERM or SIGHUP (a closed terminal, or a
 * supervisor's reload), for long-running commands' graceful shutdown: each would
 * otherwise end the process without flushing what it accepted. A second signal
 * exits at once with 130, after saying so on stderr with what `abandoned()` (if
 * given) reports the forced exit leaves undone, e.g. accepted events not yet written
 * (an empty string: nothing). While `engineBusy()`
 * (if given) says the embedded engine is running a statement, the process ends
 * itself with SIGKILL instead (exit status 137): an exit under a running statement
 * crashes in chDB's teardown (SIGSEGV with chdb 3.4; seen to hang for minutes).
 */
export function untilSignal(abandoned?: () => string, engineBusy?: () => boolean): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received: NodeJS.Signals | undefined;
    const on = (signal: NodeJS.Signals): void => {
      if (received) {
        let left = '';
        try {
          left = abandoned?.() ?? '';
        } catch {
          // the message must not stop the exit
        }
        let busy = false;
        try {
          busy = engineBusy?.() ?? false;
        } catch {
          // as above
        }
        process.stderr.write(
          `${signal} again: exiting without finishing the shutdown${left ? `; ${left}` : ''}` +
            (busy ? ' (SIGKILL: the embedded engine is running a statement, which an exit would crash under)' : '') +
            '\n',
        );
        if (busy) process.kill(process.pid, 'SIGKILL');
        process.exit(130);
      }
      received = signal;
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
    process.on('SIGHUP', on);
  });
}

/**
 * What serve and the consumer say when an ad hoc statement still runs after the store
 * closed (store/client.ts `Store.close`): the process stays up until it ends.
 */
export const STILL_RUNNING =
  'an ad hoc statement is still running in the embedded engine, which cannot cancel it: the process exits when it ends (at its timeout_s); a second signal ends the process now\n';
