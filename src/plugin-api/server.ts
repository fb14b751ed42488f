/**
 * buildServer(deps): the Fastify instance answering Docker on the plugin socket. It never
 * listens (src/daemon/daemon.ts does); tests call inject() or listen themselves.
 *
 * The wire as Docker speaks it (docs/docker-plugin-protocol.md §1): every call is a
 * POST with no Content-Type, possibly an empty body; success is HTTP 200 with a JSON body (at
 * least {}); failure is a non-200 with {"Err": "..."}. The mapping of error kinds to status
 * lives here and nowhere else.
 */
import { randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import { isOvsnetError, type ErrorKind } from '../lib/errors.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import { requestContext, type Logger } from '../lib/log.js';
import { requirePackage } from '../lib/packages.js';
import type { Metrics } from '../metrics.js';
import type { NetworkDriver } from '../driver/network-driver.js';
import { ADMIN_INFO_PATH, adminRoutes, type AdminInfo } from './admin-routes.js';
import { ipamRoutes } from './ipam-routes.js';
import { networkRoutes } from './network-routes.js';
import { shown } from './forms.js';
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
  /** Told of each Docker call answered that may do work (daemon/pauses.ts: background work waits for a pause). */
  readonly onCall?: () => void;
  /** Answers the CLI's GET /ovsnet/v1/info (admin-routes.ts); absent: no admin endpoint. */
  readonly info?: () => Promise<AdminInfo>;
  /** Largest request body accepted (BODY_LIMIT unless said). */
  readonly bodyLimit?: number;
  /** SOCKET_LIMITS unless said (tests shorten them). */
  readonly limits?: Partial<Record<keyof typeof SOCKET_LIMITS, number>>;
}

/**
 * Largest request body accepted. Docker's largest request is CreateEndpoint publishing ports:
 * about 110 bytes per published port (its exposed-port and port-map entries; measured on the
 * JSON Docker sends), so 1 MiB admits one container publishing some 9,500 ports (a media
 * server's 5,000-port RTP range fits); CreateNetwork's aux addresses take about 24 bytes each.
 * Anything larger is refused with 413 before it is parsed.
 */
export const BODY_LIMIT = 1024 * 1024;

/** Calls that only ask (health checks poll them: `ovsnet doctor`'s) and no route: not Docker at work for onCall. */
const ASKS_ONLY = new Set(['unknown', 'NetworkDriver.GetCapabilities', 'IpamDriver.GetCapabilities', 'IpamDriver.GetDefaultAddressSpaces']);

/**
 * Time limits of the plugin socket (Docker sets none on a v1 plugin's calls: these bound only
 * what a client that stalls can hold). A request's headers and body arrive within milliseconds
 * from Docker; a connection with nothing to send is closed after keepAliveTimeout, as Fastify
 * does by default, and Docker's client dials again. Handlers are bounded by the store and OVSDB
 * timeouts (OVSNET_STORE_TIMEOUT_MS), well inside connectionTimeout.
 */
export const SOCKET_LIMITS = {
  /** The whole request (headers and body) must arrive within this. */
  requestTimeoutMs: 15_000,
  /** The headers must arrive within this. */
  headersTimeoutMs: 10_000,
  /** A socket with no traffic in either direction for this long is closed. */
  connectionTimeoutMs: 120_000,
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: 72_000,
  /** Connections open at once; more are refused (Docker uses a handful). */
  maxConnections: 256,
} as const;

/**
 * Runs `fn` at most once at a time: calls while it runs fold into one more run after it (a
 * dockerd restarted during a reconcile is seen by the next one). Never throws.
 */
function coalesced(fn: () => Promise<unknown>, onError: (err: unknown) => void): () => void {
  let running = false;
  let again = false;
  const run = (): void => {
    running = true;
    void Promise.resolve()
      .then(fn)
      .catch(onError)
      .finally(() => {
        running = false;
        if (again) {
          again = false;
          run();
        }
      });
  };
  return () => {
    if (running) again = true;
    else run();
  };
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

/** No answer quotes more of a request than this (messages name the value, never echo a body). */
const MAX_ERR = 1024;

const bounded = (message: string) => (message.length > MAX_ERR ? `${message.slice(0, MAX_ERR)}... (cut)` : message);

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (headers too large, a
 * malformed request line, a timeout): answered on the socket itself, in Docker's {"Err"} form.
 */
function clientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, text, why] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [
          431,
          'Request Header Fields Too Large',
          'the request headers are larger than this server accepts (16 KiB); Docker sends a few hundred bytes',
        ]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'the request did not arrive in time']
        : [400, 'Bad Request', `the request is not valid HTTP (${err.code ?? 'parse error'})`];
  const body = JSON.stringify({ Err: why });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

export function buildServer(deps: ServerDeps): FastifyInstance {
  /** Set once close() starts: a request arriving on a kept-alive connection then gets a 503. */
  let closing = false;
  const limits = { ...SOCKET_LIMITS, ...deps.limits };
  // Request IDs: 8 hex digits counting up from a random start (a restart does not repeat the last
  // run's), unique within a run for 2^32 calls; a UUID per call cost its string and the pool's refill.
  let lastId = randomInt(2 ** 32 - 1);
  const { fastify, LogController } = requirePackage('fastify');
  const app = fastify({
    // pino's Logger is a FastifyBaseLogger; the cast keeps the instance's logger generic the
    // default one, which the FastifyInstance return type names.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit ?? BODY_LIMIT,
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    genReqId: () => (lastId = (lastId + 1) >>> 0).toString(16).padStart(8, '0'),
    // One line per Docker call comes from the onResponse hook below, with the method in it.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    // req.log is the logger itself: the requestId comes from the request context (src/lib/log.ts),
    // once; a child bound with it too wrote the key twice on every line.
    childLoggerFactory: (logger) => logger,
    // Fastify's own 503 while closing has no Err: the onRequest hook below answers it instead.
    return503OnClosing: false,
    clientErrorHandler: clientError,
    // A URL Fastify cannot decode: {"Err"} too, through the error handler.
    frameworkErrors: (err, _req, reply) => {
      void (reply as FastifyReply).code(400).send({ Err: bounded(`the request URL is not valid: ${err.message}`) });
    },
  });
  app.addHook('preClose', (done) => {
    closing = true;
    done();
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

  // Everything the call causes, in any module, logs with its requestId (src/lib/log.ts).
  app.addHook('onRequest', (req, reply, done) => {
    if (closing) {
      void reply
        .code(503)
        .header('connection', 'close')
        .send({ Err: 'ovsnet is stopping: it takes no more requests; Docker retries once ovsnet is back' });
      return;
    }
    requestContext.run({ requestId: req.id }, done);
  });

  // One line and one observation per Docker call, once it is answered. Each route gets a hook of
  // its own, its label made once when the route is registered, so a request costs no route
  // lookup (Fastify's routeOptions builds an object at each read); what no route matched (a 404,
  // a URL Fastify cannot decode) goes through the global hook as `unknown`. The CLI's reads of
  // the admin endpoint are no Docker call: neither logged nor timed as one.
  const answered = (label: string, req: FastifyRequest, reply: FastifyReply): void => {
    const method = reply.statusCode === 404 ? 'unknown' : label;
    const url = req.url.length > 100 ? `${req.url.slice(0, 100)}...` : req.url;
    req.log.info({ method, url, status: reply.statusCode, ms: Number(reply.elapsedTime.toFixed(3)) }, 'docker call');
    // The label is a route or `unknown`: a query string or a scanner's URLs make no new series.
    deps.metrics?.observeCall(method, reply.statusCode, reply.elapsedTime / 1000);
    if (!ASKS_ONLY.has(method)) deps.onCall?.();
  };
  app.addHook('onRoute', (route) => {
    if (route.url === ADMIN_INFO_PATH) return;
    const label = route.url.slice(1);
    const hook: onResponseHookHandler = (req, reply, done) => {
      answered(label, req, reply);
      done();
    };
    route.onResponse = [...(route.onResponse === undefined ? [] : [route.onResponse].flat()), hook];
  });
  app.addHook('onResponse', (req, reply, done) => {
    if (req.is404) answered('unknown', req, reply);
    done();
  });

  // Docker activates a v1 plugin once per daemon lifetime: a (re)started dockerd is the moment
  // its stale endpoints are known to be dead. Reconcile in the background, never delaying
  // Docker, and one at a time however many Activates come (anyone on the socket can send them).
  const reconcile =
    deps.onActivate === undefined
      ? undefined
      : coalesced(deps.onActivate, (err) => deps.log.warn({ err }, 'reconcile after activation failed'));
  app.post('/Plugin.Activate', (): ActivateResponse => {
    reconcile?.();
    return { Implements: deps.driver === undefined ? ['IpamDriver'] : ['NetworkDriver', 'IpamDriver'] };
  });
  ipamRoutes(app, deps.ipam);
  if (deps.driver !== undefined) networkRoutes(app, deps.driver);
  if (deps.info !== undefined) adminRoutes(app, deps.info);

  app.setNotFoundHandler((req, reply) => {
    void reply
      .code(404)
      .send({ Err: `${req.method} ${shown(req.url)} is not a method of ovsnet (NetworkDriver.*, IpamDriver.*, Plugin.Activate)` });
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    if (isOvsnetError(err)) {
      deps.metrics?.observeError(err.kind, err.code);
      req.log.warn({ err, code: err.code, kind: err.kind }, err.message);
      void reply.code(STATUS[err.kind]).send({ Err: bounded(err.message) });
      return;
    }
    const fe = err as Partial<FastifyError>;
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      void reply.code(413).send({ Err: `the request body is larger than ${deps.bodyLimit ?? BODY_LIMIT} bytes` });
      return;
    }
    // Fastify's refusals of a request (400, 415, ...): the status it chose, in Docker's form.
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      void reply.code(fe.statusCode).send({ Err: bounded(fe.message ?? 'bad request') });
      return;
    }
    req.log.error({ err }, 'unexpected error');
    void reply.code(500).send({ Err: bounded(`internal error in ovsnet: ${fe.message ?? String(err)}`) });
  });

  // Node's own limits, which Fastify's options do not reach.
  app.server.headersTimeout = limits.headersTimeoutMs;
  app.server.maxConnections = limits.maxConnections;
  return app;
}
