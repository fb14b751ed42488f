/**
 * The admin endpoint (GET /ovsnet/v1/info on the plugin socket) under mutated requests, with
 * fast-check: methods, paths near the admin path, query strings, headers and bodies. Whatever
 * comes, the answer is the info unchanged (GET, HEAD of the path) or a clear refusal (4xx with
 * {"Err": ...} naming what ovsnet serves), never a 5xx; and nothing is changed: no call reaches
 * the IPAM or the driver, no reconcile starts.
 */
import fc from 'fast-check';
import t from 'tap';
import type { NetworkDriver } from '../../src/driver/network-driver.js';
import type { Ipam } from '../../src/ipam-driver/ipam.js';
import { createLogger } from '../../src/lib/log.js';
import { ADMIN_INFO_PATH, type AdminInfo } from '../../src/plugin-api/admin-routes.js';
import { buildServer } from '../../src/plugin-api/server.js';

const INFO: AdminInfo = {
  version: '0.2.0',
  pid: 4242,
  startedAt: '2026-01-01T00:00:00.000Z',
  uptimeSeconds: 7,
  settings: { OVSNET_STORE: 'sqlite:/var/lib/ovsnet/state.db', OVSNET_ETCD_PASSWORD: '(redacted)' },
  store: { store: 'sqlite:/var/lib/ovsnet/state.db', ok: true, revision: 12, ms: 0.4 },
};

/** Every call reaching the IPAM or the driver is recorded: the admin endpoint must make none. */
const touched: string[] = [];
const recorder = <T extends object>(what: string): T =>
  new Proxy({} as T, {
    get: (_target, key) => {
      if (typeof key === 'symbol' || key === 'then') return undefined;
      return (..._args: unknown[]) => {
        touched.push(`${what}.${key}`);
        throw new Error(`${what}.${key} called`);
      };
    },
  });
let infoCalls = 0;
let reconciles = 0;
const app = buildServer({
  log: createLogger('silent'),
  ipam: recorder<Ipam>('ipam'),
  driver: recorder<NetworkDriver>('driver'),
  info: () => {
    infoCalls++;
    return Promise.resolve(INFO);
  },
  onActivate: () => {
    reconciles++;
    return Promise.resolve();
  },
});
t.teardown(() => app.close());

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/** Paths near the admin path: as is, with a query, case changed, slashes and dots, encodings, suffixes. */
const pathArb = fc.oneof(
  fc.constant(ADMIN_INFO_PATH),
  fc.string({ maxLength: 40 }).map((q) => `${ADMIN_INFO_PATH}?${encodeURIComponent(q)}`),
  fc.constantFrom(
    `${ADMIN_INFO_PATH}/`,
    ADMIN_INFO_PATH.toUpperCase(),
    `/${ADMIN_INFO_PATH}`,
    '/ovsnet/v1/../v1/info',
    '/ovsnet/v1/./info',
    '/ovsnet/v1/%69nfo',
    '/ovsnet/v1/info%00',
    '/ovsnet/v1/info%',
    '/ovsnet/v2/info',
    '/ovsnet/v1',
    '/ovsnet/v1/info/settings',
    '/ovsnet/v1/info;x',
    '/ovsnet/v1/info#frag',
  ),
  fc.string({ maxLength: 60 }).map((s) => `${ADMIN_INFO_PATH}${encodeURIComponent(s)}`),
  fc.string({ minLength: 1, maxLength: 60 }).map((s) => `/${encodeURIComponent(s)}`),
);

const bodyArb = fc.option(
  fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.json({ maxDepth: 3 }),
    fc.constantFrom('{', '[]', 'null', '{"settings":{"OVSNET_STORE":"etcd://evil:2379"}}'),
  ),
  { nil: undefined },
);

const headersArb = fc.record(
  {
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', ''),
    accept: fc.constantFrom('application/json', '*/*', 'text/html'),
    'x-forwarded-for': fc.ipV4(),
  },
  { requiredKeys: [] },
);

t.test('the admin endpoint under 500 mutated requests: the info unchanged or a clear refusal, nothing changed', async (t) => {
  const failures: string[] = [];
  await fc
    .assert(
      fc.asyncProperty(fc.constantFrom(...METHODS), pathArb, headersArb, bodyArb, async (method, url, headers, body) => {
        const before = infoCalls;
        const res = await app.inject({
          method,
          url,
          headers,
          ...(body === undefined || method === 'GET' || method === 'HEAD' ? {} : { payload: body }),
        });
        const what = `${method} ${url} ${JSON.stringify(headers)} ${JSON.stringify(body)}: ${res.statusCode} ${res.body.slice(0, 200)}`;
        if (res.statusCode >= 500) failures.push(`5xx: ${what}`);
        else if (res.statusCode === 200) {
          if (method !== 'GET' && method !== 'HEAD') failures.push(`answered a ${method}: ${what}`);
          if (method === 'GET' && res.body !== JSON.stringify(INFO)) failures.push(`answered something else than the info: ${what}`);
        } else {
          if (res.statusCode < 400) failures.push(`neither an answer nor a refusal: ${what}`);
          if (method !== 'HEAD' && !/^\{"Err":"[^"]/.test(res.body)) failures.push(`a refusal without Err: ${what}`);
          if (infoCalls !== before) failures.push(`a refused request read the info: ${what}`);
        }
        return failures.length === 0;
      }),
      { numRuns: 500, seed: 22, endOnFailure: true },
    )
    .catch((err: unknown) => failures.push(String(err).slice(0, 2000)));
  t.same(failures, [], 'every request answered with the info or refused clearly');
  t.same(touched, [], 'no call reached the IPAM or the driver');
  t.equal(reconciles, 0, 'no reconcile started');
  const again = await app.inject({ method: 'GET', url: ADMIN_INFO_PATH });
  t.same(again.json(), INFO, 'the admin endpoint answers as before');
});
