/**
 * The embedded store's files are root's alone: they hold every network's and host's records.
 * Kept apart from sqlite-db.ts so that checking them loads no SQLite (open.ts loads it later).
 */
import fs from 'node:fs';
import path from 'node:path';

/** Group and others may do nothing with state files: the store holds every network's records. */
const PRIVATE = 0o077;

/**
 * Makes the store's file and directory root's alone before SQLite opens them, and says what it
 * changed (for the caller to log). A missing directory is created 0700 and a missing file 0600;
 * SQLite creates -wal and -shm with the database's mode. An existing database, -wal or -shm open
 * to others is set to 0600. An existing directory open to others is set to 0700 only when it
 * holds nothing but this store's files and the journal: it may be shared (sqlite:/tmp/x.db).
 */
export function secureStateFiles(file: string): string[] {
  const notes: string[] = [];
  const dir = path.dirname(file);
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } else if ((fs.statSync(dir).mode & PRIVATE) !== 0) {
    const base = path.basename(file);
    const others = fs.readdirSync(dir).filter((n) => !n.startsWith(base) && !n.startsWith('unconfirmed.json'));
    if (others.length === 0) {
      fs.chmodSync(dir, 0o700);
      notes.push(`the state directory ${dir} was open to other users: set to 0700`);
    } else {
      notes.push(
        `the state directory ${dir} is open to other users and holds other files (${others.slice(0, 3).join(', ')}), so ovsnet leaves its mode: chmod 700 ${dir}, or give OVSNET_STORE a directory of its own`,
      );
    }
  }
  if (!fs.existsSync(file)) fs.closeSync(fs.openSync(file, 'a', 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    const mode = fs.statSync(f, { throwIfNoEntry: false })?.mode;
    if (mode !== undefined && (mode & PRIVATE) !== 0) {
      fs.chmodSync(f, 0o600);
      notes.push(`${f} was readable by other users (mode 0${(mode & 0o777).toString(8)}): set to 0600`);
    }
  }
  return notes;
}
