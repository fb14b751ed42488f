/** The settings the admin endpoint shows: every one, defaults filled, secrets redacted. */
import t from 'tap';
import { SETTINGS } from '../../src/config/config.js';
import { createLogger } from '../../src/lib/log.js';
import { Metrics } from '../../src/metrics.js';
import { ADMIN_INFO_PATH } from '../../src/plugin-api/admin-routes.js';
import { buildServer } from '../../src/plugin-api/server.js';
import { about } from '../../src/daemon/about.js';
import { REDACTED, effectiveSettings } from '../../src/config/settings-view.js';
import { VERSION } from '../../src/lib/version.js';
import { makeIpam } from '../helpers/ipam.js';
import { tempStore } from '../helpers/temp-store.js';

t.test('every setting, defaults filled in, the password redacted, paths to secrets shown', async (t) => {
  const s = effectiveSettings({
    OVSNET_ETCD_PASSWORD: 'hunter2',
    OVSNET_ETCD_PASSWORD_FILE: '',
    OVSNET_ETCD_KEY: '/etc/ovsnet/k.pem',
    OVSNET_HOST: ' h1 ',
  });
  t.same(Object.keys(s).sort(), Object.keys(SETTINGS).sort());
  t.equal(s.OVSNET_ETCD_PASSWORD, REDACTED);
  t.notMatch(JSON.stringify(s), /hunter2/);
  t.equal(s.OVSNET_ETCD_KEY, '/etc/ovsnet/k.pem');
  t.equal(s.OVSNET_HOST, 'h1');
  t.equal(s.OVSNET_STORE, SETTINGS.OVSNET_STORE.default);
  t.equal(effectiveSettings({}).OVSNET_ETCD_PASSWORD, '', 'unset stays empty');
});

t.test('GET /ovsnet/v1/info on the plugin socket: version, uptime, settings, store health', async (t) => {
  const store = tempStore(t);
  const log = createLogger('silent');
  const ipam = makeIpam(store, { log });
  const metrics = new Metrics();
  const app = buildServer({
    log,
    ipam,
    metrics,
    info: about(store, 'sqlite:/x.db', effectiveSettings({ OVSNET_ETCD_PASSWORD: 'hunter2' })),
  });
  t.teardown(async () => {
    await app.close();
    await ipam.stop();
  });
  const res = await app.inject({ method: 'GET', url: ADMIN_INFO_PATH });
  t.equal(res.statusCode, 200);
  t.match(res.json(), {
    version: VERSION,
    pid: process.pid,
    uptimeSeconds: 0,
    settings: { OVSNET_ETCD_PASSWORD: REDACTED },
    store: { store: 'sqlite:/x.db', ok: true, revision: Number },
  });
  t.notMatch(res.body, /hunter2/);
  t.notMatch(await metrics.registry.metrics(), /ovsnet\/v1\/info/, 'not timed as a Docker call');
  t.equal((await app.inject({ method: 'POST', url: ADMIN_INFO_PATH })).statusCode, 404, 'read-only: GET only');
  await store.close();
  t.match(
    (await app.inject({ method: 'GET', url: ADMIN_INFO_PATH })).json(),
    { store: { ok: false, error: /./ } },
    'a store that fails: said',
  );
});
