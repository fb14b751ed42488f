/**
 * Other processes' writes to the embedded store, told as they happen. A commit in WAL mode
 * appends to `FILE-wal` (a checkpoint writes FILE itself), so an inotify watch of the file's
 * directory (fs.watch) hears every process's commit, this one's included. Without it the store
 * polled the revision every 20 ms, idle or not: 50 wake-ups a second, ~10 ms of CPU a second on
 * a 2-core VM (the daemon's whole idle cost was 15 ms/s with it, 5 without). A watch that cannot
 * be made (no inotify, its watches used up) or that fails later leaves the store to its poll.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface WriteWatch {
  close(): void;
}

/**
 * Calls `onWrite` once per turn of the event loop in which FILE or FILE-wal changed (events of
 * other files in the directory are ignored); undefined when the directory cannot be watched.
 * `onLost`: the watch failed after it was made (the caller polls faster again).
 */
export function watchWrites(
  file: string,
  onWrite: () => void,
  onLost: () => void,
  watch: typeof fs.watch = fs.watch,
): WriteWatch | undefined {
  const base = path.basename(file);
  let pending = false;
  let closed = false;
  const soon = () => {
    if (pending || closed) return;
    pending = true;
    setImmediate(() => {
      pending = false;
      if (!closed) onWrite();
    });
  };
  let watcher: fs.FSWatcher;
  try {
    // A file name can be absent from an event (inotify's queue overflowed): then it may be ours.
    watcher = watch(path.dirname(file), { persistent: false }, (_event, name) => {
      if (name === null || name === base || name === `${base}-wal`) soon();
    });
  } catch {
    return undefined;
  }
  watcher.on('error', () => {
    if (closed) return;
    closed = true;
    watcher.close();
    onLost();
  });
  return {
    close: () => {
      closed = true;
      watcher.close();
    },
  };
}
