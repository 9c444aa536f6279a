import { onAbort } from './abort-listeners';

/**
 * Runs `task` for every item with at most `limit` running at once, in order of the items, and
 * resolves when all have settled; rejects with the first error after the others have settled.
 * Used where a burst (10,000 jobs loaded at a takeover, a fire's enqueue) would otherwise keep every
 * request, buffer and promise alive at the same time.
 */
export async function forEachLimited<T>(items: Iterable<T>, limit: number, task: (item: T) => Promise<unknown>): Promise<void> {
  const iterator = items[Symbol.iterator]();
  let failed = false;
  let firstError: unknown;
  const lane = async (): Promise<void> => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) {
      try {
        await task(next.value);
      } catch (err) {
        if (!failed) firstError = err;
        failed = true;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, lane));
  if (failed) throw firstError;
}

/**
 * At most `limit` holders at once; the others wait in arrival order. A waiter whose signal aborts
 * leaves the line and gets the signal's reason as its rejection.
 */
export class Semaphore {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  /** Holders now. */
  get active(): number {
    return this.held;
  }

  /** Waiters for a place now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** A release function if a place is free now (no waiting, no promise), else undefined. */
  tryAcquire(): (() => void) | undefined {
    if (this.held >= this.limit) return undefined;
    this.held += 1;
    return this.releaser();
  }

  /** Resolves with a release function, to call exactly once, when a place is free. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    const now = this.tryAcquire();
    if (now) return now;
    await new Promise<void>((resolve, reject) => {
      let stopListening: (() => void) | undefined;
      const enter = () => {
        stopListening?.();
        resolve();
      };
      this.waiting.push(enter);
      if (signal) {
        stopListening = onAbort(signal, () => {
          const at = this.waiting.indexOf(enter);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(signal.reason);
        });
      }
    });
    return this.releaser();
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The place passes straight to the next waiter, so a newcomer cannot take it in between.
      const next = this.waiting.shift();
      if (next) next();
      else this.held -= 1;
    };
  }
}

/** `promise`'s value if it settles within `ms`, else undefined (the wait ends then; the promise goes on). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Turns of the event loop handed out in order, at most `perTurn` each: `next()` resolves in a
 * macrotask after the current one and its microtasks, so whatever those queued runs first.
 * A worker's completions wait for one while handlers wait for a place (see WorkerService.take):
 * a completion left in the same microtask drain as the starts it freed places for went before
 * them, and a fire's last start waited behind the completions of all the runs before it.
 */
export class TurnQueue {
  private readonly waiting: Array<() => void> = [];
  /** Index of the first waiter not yet let go: the array is compacted once it is all let go. */
  private head = 0;
  private scheduled = false;

  constructor(private readonly perTurn: number) {}

  /** Waiters not let go yet. */
  get size(): number {
    return this.waiting.length - this.head;
  }

  next(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.waiting.push(resolve);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.letGo);
      }
    });
  }

  private readonly letGo = (): void => {
    const end = Math.min(this.waiting.length, this.head + this.perTurn);
    for (; this.head < end; this.head += 1) this.waiting[this.head]!();
    if (this.head < this.waiting.length) {
      // Let go ones are dropped now and then, not at each turn: a queue never empty keeps no garbage.
      if (this.head >= 4_096) {
        this.waiting.splice(0, this.head);
        this.head = 0;
      }
      // The rest in a later turn: the timers and the sockets get theirs in between.
      setImmediate(this.letGo);
      return;
    }
    this.waiting.length = 0;
    this.head = 0;
    this.scheduled = false;
  };
}

/** The wait before another try after `failures` (1 or more) failures in a row: `baseMs`, doubling each time, at most `maxMs`. */
export function doublingWait(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, failures - 1));
}

/** The first wait of {@link Retries} by default, and its longest. */
const RETRY_MS = 1_000;
const RETRY_MAX_MS = 30_000;

/**
 * Work tried again after it failed, by key: each failure in a row of a key doubles its wait
 * ({@link doublingWait}; by default 1 s, up to 30 s), a success forgets it, and a retry whose time
 * comes while `active()` no longer holds (this process stopped leading) is dropped.
 */
export class Retries {
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly active: () => boolean,
    private readonly baseMs = RETRY_MS,
    private readonly maxMs = RETRY_MAX_MS,
  ) {}

  /** `key` succeeded: its next failure waits `baseMs` again. */
  succeeded(key: string): void {
    this.failures.delete(key);
  }

  /** Counts a failure of `key` and runs `again` after its wait, if still active then; returns the wait. */
  failed(key: string, again: () => void): number {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    const wait = doublingWait(failures, this.baseMs, this.maxMs);
    setTimeout(() => {
      if (this.active()) again();
      else this.failures.delete(key);
    }, wait).unref();
    return wait;
  }

  /** Forgets every key (the work they stand for is no longer this process's). */
  clear(): void {
    this.failures.clear();
  }
}

