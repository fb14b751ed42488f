/** Every link-worker request is bounded: a worker that never answers fails the request, naming it. */
import t from 'tap';
import { Links } from '../../../src/driver/links/links.js';

t.test('a request the worker does not answer fails within the bound, naming the operation', async (t) => {
  const links = new Links({ timeoutMs: 200, worker: new URL('../../helpers/silent-link-worker.js', import.meta.url) });
  t.teardown(() => links.close());
  const t0 = Date.now();
  await t.rejects(links.deleteLink('ovhabc'), {
    code: 'LINK_FAILED',
    message: /^cannot deleteLink: the link worker did not answer within 200 ms/,
  });
  t.ok(Date.now() - t0 < 1000, `failed after ${Date.now() - t0} ms`);
  await t.rejects(links.aliased('ovh'), { code: 'LINK_FAILED', message: /^cannot aliased: / }, 'the next request is bounded too');
});
