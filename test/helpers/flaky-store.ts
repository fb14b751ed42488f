/**
 * A store wrapper that fails on demand, around a real one: transactions applied but unanswered
 * (`lost`), unanswered and applied only when the test says (`late`: a frozen etcd that resumes
 * after the caller gave up), or refused before being applied (`refused`), the next calls of a
 * method refused, and every open watch ended with an error (as a lost etcd stream ends).
 */
import { OvsnetError } from '../../src/lib/errors.js';
import type { Store, TxnRequest, TxnResult, WatchHandlers } from '../../src/store/types.js';

type Failable = 'list' | 'grantLease' | 'watch';

export class Flaky implements Store {
  readonly kind;
  mode: 'ok' | 'lost' | 'late' | 'refused' = 'ok';
  private readonly held: TxnRequest[] = [];
  private readonly failing = new Map<Failable, number>();
  private readonly watching = new Set<WatchHandlers>();

  constructor(private readonly inner: Store) {
    this.kind = inner.kind;
  }

  /** The next `n` calls of `method` fail as if the store were unreachable. */
  failNext(method: Failable, n: number): void {
    this.failing.set(method, n);
  }

  /** Ends every open watch with an error. */
  endWatches(): void {
    for (const h of [...this.watching]) h.onError?.(new OvsnetError('STORE_UNAVAILABLE', 'injected: the watch stream was lost'));
    this.watching.clear();
  }

  private refuse(method: Failable): void {
    const n = this.failing.get(method) ?? 0;
    if (n <= 0) return;
    this.failing.set(method, n - 1);
    throw new OvsnetError('STORE_UNAVAILABLE', `injected: ${method} refused`);
  }

  /** Applies the transactions held in `late` mode, in order. */
  async applyLate(): Promise<void> {
    for (const req of this.held.splice(0)) await this.inner.txn(req);
  }

  async txn(req: TxnRequest): Promise<TxnResult> {
    if (this.mode === 'refused') throw new OvsnetError('STORE_UNAVAILABLE', 'injected: etcd unreachable');
    if (this.mode === 'late') {
      this.held.push(req);
      throw new OvsnetError('STORE_TIMEOUT', 'injected: no answer yet');
    }
    const res = await this.inner.txn(req);
    if (this.mode === 'lost') throw new OvsnetError('STORE_TIMEOUT', 'injected: the answer was lost');
    return res;
  }
  list: Store['list'] = async (p) => {
    this.refuse('list');
    return this.inner.list(p);
  };
  grantLease: Store['grantLease'] = async (ttl) => {
    this.refuse('grantLease');
    return this.inner.grantLease(ttl);
  };
  watch: Store['watch'] = async (p, r, h) => {
    this.refuse('watch');
    const w = await this.inner.watch(p, r, h);
    this.watching.add(h);
    return {
      close: async () => {
        this.watching.delete(h);
        await w.close();
      },
    };
  };
  get: Store['get'] = (k) => this.inner.get(k);
  range: Store['range'] = (p, o) => this.inner.range(p, o);
  keepAlive: Store['keepAlive'] = (l) => this.inner.keepAlive(l);
  revokeLease: Store['revokeLease'] = (l) => this.inner.revokeLease(l);
  revision: Store['revision'] = () => this.inner.revision();
  close: Store['close'] = () => this.inner.close();
}
