/**
 * Resolves with the first SIGINT/SIGTERM, for long-running commands' graceful
 * shutdown; a second signal exits at once with 130.
 */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received: NodeJS.Signals | undefined;
    const on = (signal: NodeJS.Signals): void => {
      if (received) {
        process.stderr.write(`${signal} again: exiting without finishing the shutdown\n`);
        process.exit(130);
      }
      received = signal;
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}
