#!/usr/bin/env node
/**
 * The composition root: the only reader of process.env, signals and the socket path.
 *   ovsnet serve    run the plugin (Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET)
 */
import os from 'node:os';
import { loadConfig, type Config } from './config.js';
import { isOvsnetError, messageOf } from './errors.js';
import { hostRoutes } from './ipam-driver/host-routes.js';
import { Ipam } from './ipam-driver/ipam.js';
import { createLogger } from './log.js';
import { listenOnSocket, removeSocket } from './plugin-api/listen.js';
import { buildServer } from './plugin-api/server.js';
import { describeStore, openStore } from './store/open.js';

const USAGE = `usage: ovsnet <command>

commands:
  serve     run the plugin: Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET

Settings are OVSNET_* environment variables; see the README.`;

async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const store = openStore(config.store, config.storeTimeoutMs);
  const ipam = new Ipam({
    store,
    log: log.child({ component: 'ipam' }),
    host: os.hostname(),
    defaultPools: config.defaultPools,
    hostRoutes: () => hostRoutes(),
    readyTimeoutMs: config.storeTimeoutMs,
  });
  const app = buildServer({ log, ipam });
  // Listen first, reach the store in the background: Docker must never wait on a dead socket.
  await listenOnSocket(app, config.socket);
  ipam.start();
  log.info({ store: describeStore(config.store), socket: config.socket, pid: process.pid }, 'ovsnet serving');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping: finishing requests in flight');
    try {
      await app.close();
      await ipam.stop();
      await store.close();
    } finally {
      removeSocket(config.socket);
      log.info('stopped');
      process.exit(0);
    }
  };
  process.once('SIGTERM', (s) => void stop(s));
  process.once('SIGINT', (s) => void stop(s));
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
  switch (command) {
    case 'serve':
      await serve(config);
      return undefined; // keeps running until a signal
    default:
      process.stderr.write(`ovsnet: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
      return 2;
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
