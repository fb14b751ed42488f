/**
 * The embedded store's files are root's alone: they hold every network's and host's records.
 * Kept apart from sqlite-db.ts so that checking them loads no SQLite (open.ts loads it later).
 */
import fs from 'node:fs';
import path from 'node:path';
import { OvsnetError } from '../lib/errors.js';

/** Group and others may do nothing with state files: the store holds every network's records. */
const PRIVATE = 0o077;
/** Group or others may write: they could plant a link or file where SQLite opens by name. */
const WRITABLE_BY_OTHERS = 0o022;

const { O_RDWR, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/**
 * Opens one state file without following a link (O_NOFOLLOW; O_NONBLOCK so a FIFO cannot hang
 * the start), creating it 0600 when absent, checks it is a regular file of this user with one
 * link, and makes it 0600 by the descriptor. What it changed goes to `notes`.
 */
function secureFile(f: string, notes: string[]): void {
  const refuse = (why: string, err?: unknown) =>
    new OvsnetError(
      'STATE_FILE_UNSAFE',
      `the state file ${f} ${why}: ovsnet opens only its own regular files there; remove it (ovsnet makes it anew) or give OVSNET_STORE another directory`,
      err === undefined ? undefined : { cause: err },
    );
  let fd: number;
  try {
    fd = fs.openSync(f, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw refuse('is a symbolic link', err);
    throw err;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw refuse('is not a regular file');
    const uid = process.geteuid?.() ?? st.uid;
    if (st.uid !== uid) throw refuse(`belongs to user ${st.uid}, not to ovsnet's user ${uid}`);
    if (st.nlink !== 1) throw refuse(`has ${st.nlink} hard links (another name reaches the same file)`);
    if ((st.mode & PRIVATE) !== 0) {
      fs.fchmodSync(fd, 0o600);
      notes.push(`${f} was readable by other users (mode 0${(st.mode & 0o777).toString(8)}): set to 0600`);
    }
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Makes the store's file and directory root's alone before SQLite opens them, and says what it
 * changed (for the caller to log). A missing directory is created 0700. A directory others can
 * write is refused unless `sharedDir` (OVSNET_STATE_DIR_SHARED=true) accepts it. An existing
 * directory others can read is set to 0700 only when it holds nothing but this store's files
 * and the journal: it may be shared. The database, -wal and -shm are opened without following
 * links, made if absent (so that SQLite finds them ours), and set to 0600 by the descriptor.
 */
export function secureStateFiles(file: string, options: { readonly sharedDir?: boolean } = {}): string[] {
  const notes: string[] = [];
  const dir = path.dirname(file);
  if (!fs.existsSync(dir)) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } else {
    const mode = fs.statSync(dir).mode;
    if ((mode & WRITABLE_BY_OTHERS) !== 0 && options.sharedDir !== true) {
      throw new OvsnetError(
        'STATE_FILE_UNSAFE',
        `the state directory ${dir} is writable by other users (mode 0${(mode & 0o7777).toString(8)}): they could plant a link there that ovsnet and SQLite would follow. chmod go-w ${dir}, give OVSNET_STORE a directory of its own, or set OVSNET_STATE_DIR_SHARED=true to accept the risk`,
      );
    }
    if ((mode & WRITABLE_BY_OTHERS) !== 0) {
      notes.push(`the state directory ${dir} is writable by other users, accepted by OVSNET_STATE_DIR_SHARED=true: its mode is left`);
    } else if ((mode & PRIVATE) !== 0) {
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
  }
  for (const f of [file, `${file}-wal`, `${file}-shm`]) secureFile(f, notes);
  return notes;
}
