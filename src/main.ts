#!/usr/bin/env node
/**
 * The entry point: the only reader of process.env, argv and signals, and the one that decides the
 * exit status. `serve` runs the daemon (src/daemon/: assembled, started, stopped there); the
 * operator's commands are a table (src/cli/commands.ts) parsed by src/cli/dispatch.ts.
 *   ovsnet serve                      run the plugin (Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET)
 *   ovsnet status|networks|endpoints|ipam|doctor|version [-o json|wide|table]    the operator's view
 */
import { loadConfig, type Config } from './config/config.js';
import { COMMANDS } from './cli/commands.js';
import { EXIT, parse, usageOf, UsageError, type CommandTable } from './cli/dispatch.js';
import type { CliContext } from './cli/session.js';
import { printable } from './cli/output.js';
import type { Daemon } from './daemon/daemon.js';
import { isOvsnetError, messageOf } from './lib/errors.js';
import { createLogger, type Logger } from './lib/log.js';
import { effectiveSettings } from './config/settings-view.js';
import { applyPriority, linuxScheduler } from './daemon/priority.js';
import { VERSION } from './lib/version.js';

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

/**
 * Runs the daemon until SIGTERM or SIGINT, then stops it in order and exits 0. The daemon's
 * modules (Fastify, prom-client, the driver) load here, not with this file: the operator's
 * commands never load them, and start 85-116 ms sooner (docs/benchmarks.md, scale).
 */
async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  // Before the daemon's modules and threads: those made later inherit the main thread's priority.
  prioritize(config.nice, log);
  const { Daemon } = await import('./daemon/daemon.js');
  const daemon = new Daemon(config, log, effectiveSettings(process.env));
  lastResort(daemon, log);
  await daemon.start((err, cleanedUp) => {
    // A store that cannot even be opened (an unwritable file), or an OVSNET_UPLINK that cannot
    // be the uplink, is fatal: say so and leave.
    process.stderr.write(`ovsnet: ${messageOf(err)}\n`);
    void cleanedUp.finally(() => process.exit(1));
  });
  const stop = (signal: string) => void daemon.stop(signal).finally(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** OVSNET_NICE given (daemon/priority.ts): said at debug, or once as a warning when refused. */
function prioritize(nice: Config['nice'], log: Logger): void {
  try {
    const report = applyPriority(nice, linuxScheduler);
    if (report.refused !== undefined) log.warn({ nice }, report.refused);
    else log.debug({ nice, threadsSet: report.threadsSet, autogroup: report.group }, `scheduling priority: nice ${nice}`);
  } catch (err) {
    // Not a reason to stop serving Docker: the priority only orders ovsnet among the busy.
    log.warn({ err, nice }, `cannot set ovsnet's scheduling priority (OVSNET_NICE=${nice}): ${messageOf(err)}; it runs as started`);
  }
}

/** Every command: the daemon, and the operator's commands. */
const TABLE: CommandTable<CliContext> = {
  serve: {
    summary: "run the plugin: Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET, settings from this process's environment",
    details: 'Exit status 0 when stopped by SIGTERM or SIGINT, 1 when the store cannot be opened, 2 on invalid settings.',
    run: async () => {
      await serve(loadConfig(process.env));
      return undefined; // keeps running until a signal
    },
  },
  ...COMMANDS,
};

async function main(argv: readonly string[]): Promise<number | undefined> {
  const ctx: CliContext = {
    env: process.env,
    out: (text) => process.stdout.write(`${text}\n`),
    // Messages quote Docker's and the daemon's values: escaped, keeping their own newlines and tabs.
    err: (text) => process.stderr.write(`${printable(text, '\n\t')}\n`),
  };
  const [first] = argv;
  if (first === '--version' || first === '-v') {
    ctx.out(`ovsnet ${VERSION}`);
    return EXIT.ok;
  }
  if (first === undefined || first === '--help' || first === '-h') {
    ctx.out(usageOf(TABLE));
    return first === undefined ? EXIT.usage : EXIT.ok;
  }
  try {
    const parsed = parse(TABLE, argv);
    if ('help' in parsed) {
      ctx.out(parsed.help);
      return EXIT.ok;
    }
    return await parsed.spec.run?.(parsed.inv, ctx);
  } catch (err) {
    if (err instanceof UsageError) {
      ctx.err(`ovsnet: ${err.message}\n${err.command === undefined ? usageOf(TABLE) : `see: ovsnet ${err.command} --help`}`);
      return EXIT.usage;
    }
    if (isOvsnetError(err, 'CONFIG_INVALID')) {
      ctx.err(`ovsnet: ${err.message}`);
      return EXIT.usage;
    }
    throw err;
  }
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
