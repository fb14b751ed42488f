#!/usr/bin/env node
/**
 * The entry point: the only reader of process.env, argv and signals, and the one that decides the
 * exit status. `serve` runs the daemon (src/daemon/: assembled, started, stopped there).
 *   ovsnet serve    run the plugin (Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET)
 *   ovsnet status|networks|endpoints|ipam|doctor [--json]    the operator's view
 */
import { loadConfig, type Config } from './config.js';
import { COMMANDS, isCommand, runCommand } from './cli/commands.js';
import { Daemon } from './daemon/daemon.js';
import { isOvsnetError, messageOf } from './errors.js';
import { createLogger, type Logger } from './log.js';

const USAGE = `usage: ovsnet <command> [--json]

commands:
  serve       run the plugin: Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET
${Object.entries(COMMANDS)
  .map(([c, d]) => `  ${c.padEnd(10)}  ${d}`)
  .join('\n')}

Settings are OVSNET_* environment variables; see the README.`;

/**
 * The last resort, for a bug that lets an error escape (every handler of outside input catches
 * its own: store watches, sockets, Docker calls). A promise rejection nobody handled failed one
 * piece of work, which its caller has already given up on: it is logged with its stack and
 * ovsnet keeps serving (Node's default, ending the process, would take every host's containers'
 * plumbing requests down with it). An exception nobody caught may have left any object half
 * changed: it is logged as fatal, the link worker is closed, and the process exits 1 so that
 * systemd or Docker restarts it; state is in the store, and the restart reconciles.
 */
function lastResort(daemon: Daemon, log: Logger): void {
  process.on('unhandledRejection', (reason) => {
    log.error(
      { err: reason },
      `a promise rejection nobody handled (a bug in ovsnet; please report it): ${messageOf(reason)}; ovsnet keeps serving`,
    );
  });
  let exiting = false;
  process.on('uncaughtException', (err, origin) => {
    if (exiting) return;
    exiting = true;
    log.fatal(
      { err, origin },
      `an exception nobody caught (a bug in ovsnet; please report it): ${messageOf(err)}; ovsnet exits, and reconciles when started again`,
    );
    void daemon.abandon().finally(() => process.exit(1));
  });
}

/** Runs the daemon until SIGTERM or SIGINT, then stops it in order and exits 0. */
async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const daemon = new Daemon(config, log);
  lastResort(daemon, log);
  await daemon.start((err, cleanedUp) => {
    // A store that cannot even be opened (an unwritable file) is fatal: say so and leave.
    process.stderr.write(`ovsnet: ${messageOf(err)}\n`);
    void cleanedUp.finally(() => process.exit(1));
  });
  const stop = (signal: string) => void daemon.stop(signal).finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function main(argv: readonly string[]): Promise<number | undefined> {
  const [command] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    process.stderr.write(`ovsnet: ${messageOf(err)}\n`);
    return 2;
  }
  if (command === 'serve') {
    await serve(config);
    return undefined; // keeps running until a signal
  }
  if (isCommand(command)) {
    const extra = argv.slice(1).filter((a) => a !== '--json');
    if (extra.length > 0) {
      process.stderr.write(`ovsnet: ${command} takes only --json, not ${extra.join(' ')}\n`);
      return 2;
    }
    return runCommand(command, argv.includes('--json'), config);
  }
  process.stderr.write(`ovsnet: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`ovsnet: ${isOvsnetError(err) ? `${err.code}: ` : ''}${messageOf(err)}\n`);
    process.exit(1);
  },
);
