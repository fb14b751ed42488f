/**
 * buildServer(deps): the Fastify instance answering Docker on the plugin socket. It never
 * listens (src/daemon/daemon.ts does); tests call inject() or listen themselves.
 *
 * The wire as Docker speaks it (docs/docker-plugin-protocol.md §1): every call is a
 * POST with no Content-Type, possibly an empty body; success is HTTP 200 with a JSON body (at
 * least {}); failure is a non-200 with {"Err": "..."}. The mapping of error kinds to status
 * lives here and nowhere else.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import { isOvsnetError, type ErrorKind } from '../errors.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import { requestContext, type Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { NetworkDriver } from '../driver/network-driver.js';
import { ipamRoutes } from './ipam-routes.js';
import { networkRoutes } from './network-routes.js';
import type { ActivateResponse } from './wire.js';

export interface ServerDeps {
  readonly log: Logger;
  readonly ipam: Ipam;
  /** Called on Plugin.Activate (in the background). */
  readonly onActivate?: () => Promise<unknown>;
  /** Absent: ovsnet serves only IPAM (for Docker's own drivers). */
  readonly driver?: NetworkDriver;
  /** Observes every call and error, when metrics are on. */
  readonly metrics?: Pick<Metrics, 'observeCall' | 'observeError'>;
  /** Largest request body accepted; Docker's are a few KiB. */
  readonly bodyLimit?: number;
}

/**
 * Docker reads only "not 200". 500 for every kind keeps old engines happy; the kind travels in
 * the message's code for the logs. Two exceptions Docker itself relies on: 404 for a method
 * that does not exist, 413 for a body over the limit.
 */
const STATUS: Record<ErrorKind, number> = {
  InvalidParameter: 500,
  NotFound: 500,
  Conflict: 500,
  Unavailable: 500,
  Forbidden: 500,
  System: 500,
};

export function buildServer(deps: ServerDeps): FastifyInstance {
  const app = Fastify({
    // pino's Logger is a FastifyBaseLogger; the cast keeps the instance's logger generic the
    // default one, which the FastifyInstance return type names.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit ?? 1024 * 1024,
    genReqId: () => randomUUID().slice(0, 8),
    // One line per Docker call comes from the onResponse hook below, with the method in it.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    // req.log is the logger itself: the requestId comes from the request context (src/log.ts),
    // once; a child bound with it too wrote the key twice on every line.
    childLoggerFactory: (logger) => logger,
    return503OnClosing: true,
  });

  // Docker sends no Content-Type at all: parse every body as JSON, an empty one as undefined.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch {
      const err = new Error(`the request body is not JSON: ${JSON.stringify(text.slice(0, 80))}`) as FastifyError;
      err.statusCode = 400;
      done(err, undefined);
    }
  });

  // Everything the call causes, in any module, logs with its requestId (src/log.ts).
  app.addHook('onRequest', (req, _reply, done) => {
    requestContext.run({ requestId: req.id }, done);
  });

  app.addHook('onResponse', (req, reply, done) => {
    const method = req.url.slice(1);
    req.log.info({ method, status: reply.statusCode, ms: Number(reply.elapsedTime.toFixed(3)) }, 'docker call');
    // Unknown methods share one label: a scanner must not blow up the series count.
    deps.metrics?.observeCall(reply.statusCode === 404 ? 'unknown' : method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  app.post('/Plugin.Activate', (req): ActivateResponse => {
    // Docker activates a v1 plugin once per daemon lifetime: a (re)started dockerd is the moment
    // its stale endpoints are known to be dead. Reconcile in the background; never delay Docker.
    if (deps.onActivate !== undefined) {
      deps.onActivate().catch((err: unknown) => req.log.warn({ err }, 'reconcile after activation failed'));
    }
    return { Implements: deps.driver === undefined ? ['IpamDriver'] : ['NetworkDriver', 'IpamDriver'] };
  });
  ipamRoutes(app, deps.ipam);
  if (deps.driver !== undefined) networkRoutes(app, deps.driver);

  app.setNotFoundHandler((req, reply) => {
    void reply
      .code(404)
      .send({ Err: `${req.method} ${req.url} is not a method of ovsnet (NetworkDriver.*, IpamDriver.*, Plugin.Activate)` });
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    if (isOvsnetError(err)) {
      deps.metrics?.observeError(err.kind, err.code);
      req.log.warn({ err, code: err.code, kind: err.kind }, err.message);
      void reply.code(STATUS[err.kind]).send({ Err: err.message });
      return;
    }
    const fe = err as Partial<FastifyError>;
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      void reply.code(413).send({ Err: `the request body is larger than ${deps.bodyLimit ?? 1024 * 1024} bytes` });
      return;
    }
    if (fe.statusCode === 400) {
      void reply.code(400).send({ Err: fe.message ?? 'bad request' });
      return;
    }
    req.log.error({ err }, 'unexpected error');
    void reply.code(500).send({ Err: `internal error in ovsnet: ${fe.message ?? String(err)}` });
  });

  return app;
}
