/**
 * Loaded into a daemon under test with `node --import=file:///.../dist/bench/heap-sampler.js?dir=DIR`
 * (the builds bench does so when BENCH_HEAP_DIR is set; the directory rides in the URL so that
 * any launcher's process gets it): SIGUSR2 starts sampling what the process allocates
 * (bench/heap-profile.ts: freed objects included); the next SIGUSR2 stops and writes the bytes by
 * frame to DIR/heap-PID-K.json (K counting the windows), and the whole profile (the call tree,
 * for who called what allocated) to DIR/heap-PID-K.heapprofile. Bench code only: never in the
 * plugin's entrypoint.
 */
import fs from 'node:fs';
import path from 'node:path';
import { sampleAllocations, type Allocations } from './heap-profile.js';

const dir = new URL(import.meta.url).searchParams.get('dir');
if (dir !== null && dir !== '') {
  let stop: Promise<() => Promise<Allocations>> | undefined;
  let windows = 0;
  process.on('SIGUSR2', () => {
    if (stop === undefined) {
      stop = sampleAllocations(path.join(dir, `heap-${process.pid}-${++windows}.heapprofile`));
      return;
    }
    const stopping = stop;
    stop = undefined;
    const file = path.join(dir, `heap-${process.pid}-${windows}.json`);
    void stopping
      .then((s) => s())
      .then((bytes) => fs.writeFileSync(file, JSON.stringify(bytes)))
      .catch((err: unknown) => process.stderr.write(`heap sampler: ${String(err)}\n`));
  });
}
