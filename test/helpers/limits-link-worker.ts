/** A link worker that answers every request with the resource limits it was started with (test/driver/links/worker-limits.test.ts). */
import { parentPort, resourceLimits } from 'node:worker_threads';

parentPort?.on('message', (req: unknown) => {
  if (req === 'close') parentPort?.close();
  else parentPort?.postMessage({ id: (req as { id: number }).id, result: resourceLimits });
});
