/**
 * Loaded into `ovsnet serve` with NODE_OPTIONS=--import (test/daemon/last-resort.test.ts), as a
 * stand-in for a bug: on SIGUSR2 a promise rejection nobody handles, on SIGHUP an exception
 * nobody catches (thrown from the signal's handler).
 */
process.on('SIGUSR2', () => {
  void Promise.reject(new Error('test fault: a rejection nobody handles'));
});
process.on('SIGHUP', () => {
  throw new Error('test fault: an exception nobody catches');
});
