#!/usr/bin/env node
/**
 * The composition root: the only reader of process.env, signals and the socket path.
 *   ovsnet serve    run the plugin (Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET)
 */
import { loadConfig, type Config } from './config.js';
import { isOvsnetError, messageOf } from './errors.js';
import { createLogger } from './log.js';
import { describeStore, openStore } from './store/open.js';

const USAGE = `usage: ovsnet <command>

commands:
  serve     run the plugin: Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET

Settings are OVSNET_* environment variables; see the README.`;

async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const store = openStore(config.store, config.storeTimeoutMs);
  log.info({ store: describeStore(config.store), socket: config.socket }, 'ovsnet starting');
  const stop = async (signal: string) => {
    log.info({ signal }, 'stopping');
    await store.close();
    process.exit(0);
  };
  process.once('SIGTERM', (s) => void stop(s));
  process.once('SIGINT', (s) => void stop(s));
  try {
    log.info({ revision: await store.revision() }, 'store reachable');
  } catch (err) {
    log.warn({ err }, 'store not reachable yet');
  }
  await new Promise<never>(() => undefined);
}

async function main(argv: readonly string[]): Promise<number> {
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
  switch (command) {
    case 'serve':
      await serve(config);
      return 0;
    default:
      process.stderr.write(`ovsnet: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`ovsnet: ${isOvsnetError(err) ? `${err.code}: ` : ''}${messageOf(err)}\n`);
    process.exit(1);
  },
);
