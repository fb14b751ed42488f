/**
 * How a store of an older layout becomes this one's (src/store/layout.ts runs it before writing
 * the layout key), each step by the owner of the keys it moves. Idempotent: two daemons starting
 * on one store may both run it.
 */
import { migrateLogical } from '../driver/records/logical-records.js';
import type { Upgrade } from '../store/layout.js';
import type { Store } from '../store/types.js';

export const storeUpgrade =
  (store: Store): Upgrade =>
  async (from) => {
    // Layout 2: logical network members out of their records, into keys of their own.
    if (from < 2) await migrateLogical(store);
  };
