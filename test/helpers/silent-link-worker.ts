/** A link worker that never answers a request (test/driver/links/timeout.test.ts); it ends on 'close'. */
import { parentPort } from 'node:worker_threads';

parentPort?.on('message', (req: unknown) => {
  if (req === 'close') parentPort?.close();
});
