/** A background pass repeated at an interval (reclaim.ts, reap.ts): the next starts after the last ends. */
export class Repeater {
  private timer: NodeJS.Timeout | undefined;

  /** `pass` every `intervalMs`, the first one interval from now; a failed pass goes to `onError`. */
  start(intervalMs: number, pass: () => Promise<unknown>, onError: (err: unknown) => void): void {
    const tick = () => {
      pass().then(
        () => (this.timer = setTimeout(tick, intervalMs).unref()),
        (err: unknown) => {
          onError(err);
          this.timer = setTimeout(tick, intervalMs).unref();
        },
      );
    };
    this.timer = setTimeout(tick, intervalMs).unref();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
