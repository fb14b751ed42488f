/**
 * Outcomes the store could not confirm. A reservation whose transaction timed out may still be
 * applied (a frozen etcd processes it once back) while Docker was told it failed: a leak; a
 * release that timed out Docker treats as done. Each is remembered here and settled once the
 * store answers (settle-unconfirmed.ts; each step idempotent). Finding nothing is proof only
 * when a look at least `confirmMs` after the first empty one finds nothing either (the lost
 * request may still be on its way). Pending doubts are kept in a journal (OVSNET_JOURNAL),
 * rewritten whole off the request path (temporary file, fsync, rename; one write in flight,
 * changes fold into it; stop() waits for it), at most JOURNAL_CAP of them: beyond it they are
 * settled from memory only and an error says so once; none is refused. docs/ipam.md says more.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';

export type Doubt =
  | { readonly kind: 'pool'; readonly token: string; readonly at: Date }
  | { readonly kind: 'request'; readonly poolId: string; readonly token: string; readonly at: Date }
  | { readonly kind: 'release'; readonly poolId: string; readonly address: string; readonly at: Date };

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 5_000;
/** How long after a first empty look a second one must come before a doubt is dropped. */
const CONFIRM_MS = 5_000;

/** Doubts the journal holds at most (about 1 MiB of JSON). */
export const JOURNAL_CAP = 10_000;

/** What settling a doubt found: something undone (or a release redone), or nothing to undo. */
export type Settled = 'undone' | 'nothing';

export class Doubts {
  private readonly pending: Doubt[] = [];
  private timer: NodeJS.Timeout | undefined;
  private delayMs = FIRST_DELAY_MS;
  private stopped = false;
  private loaded = false;
  /** When a look first found nothing to undo, per doubt (memory only: a restart looks again). */
  private readonly clearSince = new Map<Doubt, number>();
  /** The write in flight (resolves when done, never rejects), and whether another is due after it. */
  private writing: Promise<void> | undefined;
  private dirty = false;
  /** The cap was passed (said once until the journal fits again). */
  private overCap = false;

  /** `journal`: the file that keeps pending doubts across restarts ('' or absent: memory only). */
  constructor(
    private readonly settle: (d: Doubt) => Promise<Settled>,
    private readonly log: Logger,
    private readonly journal = '',
    private readonly confirmMs = CONFIRM_MS,
    private readonly cap = JOURNAL_CAP,
  ) {}

  get size(): number {
    return this.pending.length;
  }

  /** Takes up what an earlier run left in the journal; settled in the background. */
  load(): void {
    if (this.loaded) return;
    this.loaded = true;
    if (this.journal === '' || !fs.existsSync(this.journal)) return;
    let loaded: Doubt[];
    try {
      const raw = JSON.parse(fs.readFileSync(this.journal, 'utf8')) as (Omit<Doubt, 'at'> & { at: string })[];
      loaded = raw.map((d) => ({ ...d, at: new Date(d.at) }) as Doubt);
      if (loaded.some((d) => Number.isNaN(d.at.getTime()) || !['pool', 'request', 'release'].includes(d.kind)))
        throw new Error('an entry is not a doubt');
    } catch (err) {
      const aside = `${this.journal}.unreadable-${Date.now()}`;
      fs.renameSync(this.journal, aside);
      this.log.error({ err }, `cannot read the journal ${this.journal} (${messageOf(err)}); moved to ${aside} for inspection`);
      return;
    }
    this.pending.push(...loaded);
    if (loaded.length > 0)
      this.log.warn(
        { doubts: loaded },
        `${loaded.length} unconfirmed IPAM change(s) from before the restart; settled once the store answers`,
      );
    this.schedule();
  }

  add(d: Doubt): void {
    this.pending.push(d);
    this.persist();
    this.log.warn({ doubt: d }, 'the store did not confirm an IPAM change; it is settled once the store answers');
    this.schedule();
  }

  /** Settles everything pending now; those that fail again stay. */
  async settleAll(): Promise<void> {
    const before = this.pending.length;
    for (const d of [...this.pending]) {
      try {
        if ((await this.settle(d)) === 'nothing' && !this.confirmedClear(d)) continue;
        this.pending.splice(this.pending.indexOf(d), 1);
        this.clearSince.delete(d);
      } catch (err) {
        this.log.debug({ err }, `cannot settle an unconfirmed IPAM change yet: ${messageOf(err)}`);
      }
    }
    if (this.pending.length !== before) this.persist();
    await this.flushed(); // in the background (a timer), never on a request
  }

  /** After a look that found nothing: true when an earlier empty look is confirmMs old. */
  private confirmedClear(d: Doubt): boolean {
    const since = this.clearSince.get(d);
    if (since === undefined) {
      this.clearSince.set(d, Date.now());
      return false;
    }
    return Date.now() - since >= this.confirmMs;
  }

  /** Schedules a write of what is pending (changes meanwhile fold into it); never throws. */
  private persist(): void {
    if (this.journal === '') return;
    this.dirty = true;
    this.writing ??= this.writeWhileDirty();
  }

  /** Writes until nothing changed during the last write; one at a time. */
  private async writeWhileDirty(): Promise<void> {
    await Promise.resolve(); // after the current request's synchronous work
    while (this.dirty) {
      this.dirty = false;
      await this.write();
    }
    this.writing = undefined;
  }

  /** Writes the journal (removes it when nothing is pending); logs a failure, never throws. */
  private async write(): Promise<void> {
    try {
      if (this.pending.length === 0) {
        await fsp.rm(this.journal, { force: true });
        return;
      }
      if (this.pending.length > this.cap && !this.overCap) {
        this.log.error(
          { pending: this.pending.length, cap: this.cap },
          `more than ${this.cap} unconfirmed IPAM changes: the journal ${this.journal} keeps the first ${this.cap}, the rest are settled from memory only (a restart before the store answers would forget them)`,
        );
      }
      this.overCap = this.pending.length > this.cap;
      await fsp.mkdir(path.dirname(this.journal), { recursive: true, mode: 0o700 });
      const tmp = `${this.journal}.tmp`;
      const file = await fsp.open(tmp, 'w', 0o600);
      try {
        await file.writeFile(JSON.stringify(this.pending.slice(0, this.cap)));
        await file.sync();
      } finally {
        await file.close();
      }
      await fsp.rename(tmp, this.journal);
    } catch (err) {
      this.log.error(
        { err },
        `cannot write the journal ${this.journal} (${messageOf(err)}): unconfirmed IPAM changes are kept in memory only; check OVSNET_JOURNAL`,
      );
    }
  }

  /** Resolves once the journal holds what is pending now (tests, stop). */
  async flushed(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
  }

  /** Stops settling; resolves once the last journal write is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.flushed();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.settleAll().then(() => {
        this.delayMs = this.pending.length === 0 ? FIRST_DELAY_MS : Math.min(this.delayMs * 2, MAX_DELAY_MS);
        if (this.pending.length > 0) this.schedule();
      });
    }, this.delayMs);
    this.timer.unref();
  }
}
