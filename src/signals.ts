/**
 * How long-running commands wait to be stopped: SIGINT/SIGTERM resolve with the signal, SIGHUP calls
 * `onReload` (configuration or rules reload). Listeners are removed once stopped.
 */
export function waitForSignals(onReload: () => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const hup = (): void => onReload();
    const stop = (signal: NodeJS.Signals): void => {
      process.off('SIGHUP', hup);
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGHUP', hup);
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
