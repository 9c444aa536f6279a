/**
 * Runs an async task one at a time. A request made while it runs schedules exactly one more run,
 * however many requests arrive meanwhile: watch-driven reloads (caches, the election) need the
 * latest state, not one reload per notification.
 */
export class CoalescingRunner {
  private current: Promise<void> | undefined;
  private pending = false;
  private stopped = false;

  constructor(
    private readonly task: () => Promise<void>,
    /** Called with a run's error; the runner goes on (the owner resyncs on reconnect). */
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Requests a run; resolves when the run that covers this request has finished. */
  request(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.current) {
      this.pending = true;
      return this.current;
    }
    this.current = (async () => {
      do {
        this.pending = false;
        try {
          await this.task();
        } catch (error) {
          if (!this.stopped) this.onError(error);
        }
      } while (this.pending && !this.stopped);
    })().finally(() => (this.current = undefined));
    return this.current;
  }

  /** From inside the task: run once more after this run. */
  again(): void {
    this.pending = true;
  }

  /** Resolves once no run is in progress or scheduled. */
  async settled(): Promise<void> {
    while (this.current) await this.current;
  }

  /** No more runs; resolves when the one in progress has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.current?.catch(() => undefined);
  }
}
