/**
 * What the admin endpoint answers (plugin-api/admin-routes.ts): version, uptime, the settings in
 * effect and the store's health, read on each request (one store revision read, bounded by
 * OVSNET_STORE_TIMEOUT_MS like every store call).
 */
import { messageOf } from '../lib/errors.js';
import type { AdminInfo, SwarmVipsInfo } from '../plugin-api/admin-routes.js';
import type { Settings } from '../config/settings-view.js';
import type { Store } from '../store/types.js';
import { VERSION } from '../lib/version.js';

export function about(
  store: Pick<Store, 'revision'>,
  storeName: string,
  settings: Settings,
  swarmVips?: () => SwarmVipsInfo,
): () => Promise<AdminInfo> {
  const startedAt = new Date();
  return async () => {
    const t0 = performance.now();
    const health = await store.revision().then(
      (revision) => ({ store: storeName, ok: true, revision, ms: Math.round(performance.now() - t0) }),
      (err: unknown) => ({ store: storeName, ok: false, ms: Math.round(performance.now() - t0), error: messageOf(err) }),
    );
    return {
      version: VERSION,
      pid: process.pid,
      startedAt: startedAt.toISOString(),
      uptimeSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
      settings,
      store: health,
      ...(swarmVips === undefined ? {} : { swarmVips: swarmVips() }),
    };
  };
}
