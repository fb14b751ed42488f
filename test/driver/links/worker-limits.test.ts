/** The link worker is a V8 isolate of its own: it runs with a small young generation and a bounded old one. */
import t from 'tap';
import { LINK_WORKER_LIMITS, Links } from '../../../src/driver/links/links.js';

t.test('the link worker starts with the small heap limits', async (t) => {
  const links = new Links({ worker: new URL('../../helpers/limits-link-worker.js', import.meta.url) });
  t.teardown(() => links.close());
  const limits = (await links.alias('ovhx')) as unknown as Record<string, number>;
  t.equal(limits.maxYoungGenerationSizeMb, LINK_WORKER_LIMITS.maxYoungGenerationSizeMb);
  t.equal(limits.maxOldGenerationSizeMb, LINK_WORKER_LIMITS.maxOldGenerationSizeMb);
  t.ok(LINK_WORKER_LIMITS.maxYoungGenerationSizeMb <= 4, 'a young generation of a few MiB (Node gives each isolate up to 48)');
});
