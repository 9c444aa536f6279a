import { onAbort } from '../shared/abort-listeners';

/**
 * Holds requests until their fire time with one timer per distinct wake time, not one per request:
 * every request of a fire wakes in the same timer callback, so their handlers start one after the
 * other in the microtasks that follow, before any of them gets to its completion work (the release,
 * BullMQ's moveToFinished). With a timer each, Node ran each woken request up to its first real I/O
 * before the next timer: the 100th item of a fire started after 99 completions, 30 ms late.
 */
export class FireAlarm {
  /** Per wake time: the requests held for it, and those that let it go first (woken after them). */
  private readonly waiters = new Map<number, { held: Set<() => void>; behind: Set<() => void> }>();

  /**
   * Resolves true once the wall clock reaches `at`, or false as soon as `signal` aborts (true at
   * once when `at` has passed). `behind`: woken after every request held for `at` without it, even
   * those that came later (a request that lets that fire go first).
   */
  wait(at: number, signal: AbortSignal, behind = false): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (Date.now() >= at) return Promise.resolve(true);
    return new Promise((resolve) => {
      let waiters = this.waiters.get(at);
      if (!waiters) {
        waiters = { held: new Set(), behind: new Set() };
        this.waiters.set(at, waiters);
        this.arm(at);
      }
      const group = behind ? waiters.behind : waiters.held;
      const wake = (): void => {
        stopListening();
        resolve(true);
      };
      group.add(wake);
      const stopListening = onAbort(signal, () => {
        group.delete(wake);
        resolve(false);
      });
    });
  }

  /**
   * The earliest wake time after `now` and no later than `now + withinMs` that has a request held
   * for it, if any: a request that is to let that fire go first waits `behind` it.
   */
  nextWake(now: number, withinMs: number): number | undefined {
    let next: number | undefined;
    for (const [at, { held }] of this.waiters) {
      if (at > now && at <= now + withinMs && held.size > 0 && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  /** Wake times with a timer set (for tests and diagnostics). */
  get pending(): number {
    return this.waiters.size;
  }

  private arm(at: number): void {
    setTimeout(() => {
      // Timers run on a monotonic clock and may wake a millisecond before the wall clock gets there.
      if (Date.now() < at) return this.arm(at);
      const waiters = this.waiters.get(at);
      this.waiters.delete(at);
      if (!waiters) return;
      for (const wake of waiters.held) wake();
      for (const wake of waiters.behind) wake();
    }, at - Date.now());
  }
}
