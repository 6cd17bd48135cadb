/**
 * Resolves with the first SIGINT/SIGTERM, for long-running commands' graceful
 * shutdown; a second signal exits at once with 130, after saying so on stderr
 * with what `abandoned()` (if given) reports the forced exit leaves undone, e.g.
 * accepted events not yet written (an empty string: nothing).
 */
export function untilSignal(abandoned?: () => string): Promise<NodeJS.Signals> {
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
        process.stderr.write(`${signal} again: exiting without finishing the shutdown${left ? `; ${left}` : ''}\n`);
        process.exit(130);
      }
      received = signal;
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}
