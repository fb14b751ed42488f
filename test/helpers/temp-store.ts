/** An embedded store in a temporary directory of its own, closed and removed when the test ends. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';

export function tempStore(t: Test): SqliteStore {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-store-'));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return store;
}
