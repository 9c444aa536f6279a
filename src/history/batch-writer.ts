import type { Logger } from '../shared/logger';
import { executionRecordSchema, type ExecutionRecord } from '../shared/registry/execution-record';
import { TypedEmitter } from '../shared/typed-emitter';
import { toFieldIssues } from '../shared/validation';
import { backoffDelayMs, sleep } from '../shared/zk/backoff';
import { BoundedQueue } from './bounded-queue';
import type { DropReason, HistoryStore, HistoryWriterEvents, HistoryWriterStats } from './history-events';

/** How a {@link BatchWriter} batches, buffers, retries and closes. */
export interface BatchingOptions {
  /** Most entries waiting for the store; beyond it the oldest are dropped (and counted). */
  maxBuffered: number;
  /** Most entries in one write; a full batch is written at once instead of at the next tick. */
  batchSize: number;
  /** How long an entry may wait for more to share its write. */
  flushIntervalMs: number;
  /** Back-off between failed writes: base * random(1..2^n), capped at retryMaxMs. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** How long close() keeps trying to write what is buffered. */
  closeTimeoutMs: number;
}

/** What one write achieved short of a failure: entries to try again, entries refused for good. */
export interface SendOutcome<T> {
  retry?: readonly T[];
  rejected?: number;
}

/** Waits for `step` or `ms`, whichever comes first, leaving no timer behind. */
async function raceDeadline(step: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(ms, 0))));
  try {
    await Promise.race([step, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

const NO_DROPS: Record<DropReason, number> = { overflow: 0, rejected: 0, invalid: 0, closed: 0 };

/**
 * The part every history writer shares: callers hand entries over synchronously and never wait;
 * entries are written in batches (at most one write in flight), on a short timer or as soon as a
 * batch is full; a failed write puts its batch back in front and is retried with back-off, so an
 * outage loses nothing while the bounded buffer has room; what had to be dropped is counted, logged
 * and emitted; close() writes what is left within a deadline. Subclasses say how a batch is written.
 */
export abstract class BatchWriter<T> extends TypedEmitter<HistoryWriterEvents> {
  private readonly queue: BoundedQueue<T>;
  private timer: NodeJS.Timeout | undefined;
  /** True while `timer` is a back-off wait: new entries must not cut it short. */
  private backingOff = false;
  /** True while `timer` is the zero wait of a full batch. */
  private flushNow = false;
  private running: Promise<void> | undefined;
  private inFlight = 0;
  private failures = 0;
  private written = 0;
  private failedFlushes = 0;
  private readonly dropped = { ...NO_DROPS };
  private readonly unreported = { ...NO_DROPS };
  private outage: { since: number; maxBuffered: number; droppedBefore: number } | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;
  private invalidLogged = false;

  protected constructor(
    protected readonly store: HistoryStore,
    private readonly batching: BatchingOptions,
    protected readonly logger: Logger,
  ) {
    super(logger);
    this.queue = new BoundedQueue(batching.maxBuffered);
  }

  /** Writes one batch; throws if the store failed (the whole batch is retried). */
  protected abstract send(batch: readonly T[]): Promise<SendOutcome<T> | void>;

  /** False while the store is known to be unreachable: the write is not even tried. */
  protected isReady(): boolean {
    return true;
  }

  /** Counters since creation. */
  stats(): HistoryWriterStats {
    return {
      store: this.store,
      buffered: this.queue.length + this.inFlight,
      written: this.written,
      dropped: Object.values(this.dropped).reduce((a, b) => a + b, 0),
      droppedBy: { ...this.dropped },
      failedFlushes: this.failedFlushes,
      unavailableSince: this.outage?.since ?? null,
    };
  }

  /** Queues `entry`; returns at once. After close() the entry is dropped and reported. */
  protected enqueue(entry: T): void {
    if (this.closed) {
      this.drop(1, 'closed');
      this.reportDrops();
      return;
    }
    const dropped = this.queue.push(entry);
    if (dropped > 0) this.drop(dropped, 'overflow');
    if (this.outage) this.outage.maxBuffered = Math.max(this.outage.maxBuffered, this.queue.length + this.inFlight);
    this.schedule();
  }

  /** `record` validated, or undefined once it has been dropped and reported as invalid. */
  protected validRecord(record: ExecutionRecord): ExecutionRecord | undefined {
    const result = executionRecordSchema.safeParse(record);
    if (result.success) return result.data;
    this.dropInvalid(toFieldIssues(result.error), record);
    return undefined;
  }

  /** Drops a record that cannot be stored. A bad record is a bug upstream: said once loudly, counted always. */
  protected dropInvalid(problem: unknown, record: unknown): void {
    const job = (record as { job?: unknown } | undefined)?.job;
    this.logger[this.invalidLogged ? 'debug' : 'warn']({ problem, job }, 'not an ExecutionRecord; dropped');
    this.invalidLogged = true;
    this.drop(1, 'invalid');
  }

  /** Counts entries lost for `reason`; reported with the next flush attempt. */
  protected drop(count: number, reason: DropReason): void {
    this.dropped[reason] += count;
    this.unreported[reason] += count;
  }

  /** Writes what is buffered now (waiting out no timer); resolves when the store took it or a write failed. */
  async flush(): Promise<void> {
    while (this.running) await this.running;
    if (this.closed) return this.closing;
    this.clearTimer();
    return this.run(true);
  }

  /** Writes what is left within `closeTimeoutMs`, then reports the rest as dropped; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  /** Same as {@link close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private schedule(): void {
    if (this.closed || this.running || this.backingOff || this.queue.length === 0) return;
    if (this.queue.length >= this.batching.batchSize) {
      // Armed once: every entry appended until it fires used to clear and set a timer again.
      if (this.timer && this.flushNow) return;
      this.clearTimer();
      this.arm(0, () => void this.run(false));
      this.flushNow = true;
    } else if (!this.timer) {
      this.arm(this.batching.flushIntervalMs, () => void this.run(false));
    }
  }

  private arm(ms: number, then: () => void): void {
    // unref: a writer alone must not keep a process alive; close() is what flushes on the way out.
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushNow = false;
      then();
    }, ms).unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.flushNow = false;
    this.backingOff = false;
  }

  /** One flush loop at a time: full batches back to back, a partial one only if `all`. */
  private run(all: boolean): Promise<void> {
    this.running ??= (async () => {
      while (this.queue.length > 0 && !this.closed) {
        if (!(await this.flushOnce())) return this.retryLater();
        if (!all && this.queue.length < this.batching.batchSize) break;
      }
    })().finally(() => {
      this.running = undefined;
      this.schedule();
    });
    return this.running;
  }

  private retryLater(): void {
    if (this.closed) return;
    const wait = backoffDelayMs(this.failures - 1, {
      baseSleepMs: this.batching.retryBaseMs,
      maxSleepMs: this.batching.retryMaxMs,
      maxRetries: Infinity,
    });
    this.clearTimer();
    this.backingOff = true;
    this.arm(wait, () => {
      this.backingOff = false;
      void this.run(false);
    });
  }

  /** Takes one batch and writes it; false if the store failed (the batch is back in front). */
  private async flushOnce(): Promise<boolean> {
    this.reportDrops();
    if (!this.isReady()) {
      this.failed(new Error(`${this.store} is not connected`));
      return false;
    }
    const batch = this.queue.take(this.batching.batchSize);
    this.inFlight = batch.length;
    const started = Date.now();
    let outcome: SendOutcome<T> | void;
    try {
      outcome = await this.send(batch);
    } catch (err) {
      this.putBack(batch);
      this.failed(err instanceof Error ? err : new Error(String(err)));
      return false;
    } finally {
      this.inFlight = 0;
    }
    const retry = outcome?.retry ?? [];
    const rejected = outcome?.rejected ?? 0;
    if (rejected > 0) this.drop(rejected, 'rejected');
    const done = batch.length - retry.length - rejected;
    this.written += done;
    if (done > 0) this.emit('history:flushed', { store: this.store, records: done, durationMs: Date.now() - started });
    if (retry.length > 0) {
      this.putBack(retry);
      this.failed(new Error(`${this.store} refused ${retry.length} of ${batch.length} records for now`));
      return false;
    }
    this.recovered();
    this.reportDrops();
    return true;
  }

  private putBack(entries: readonly T[]): void {
    const dropped = this.queue.putBack(entries);
    if (dropped > 0) this.drop(dropped, 'overflow');
  }

  private failed(error: Error): void {
    this.failures++;
    this.failedFlushes++;
    const buffered = this.queue.length;
    if (this.outage) {
      this.outage.maxBuffered = Math.max(this.outage.maxBuffered, buffered);
      this.logger.debug({ err: error, store: this.store, buffered, failures: this.failures }, 'history write failed again');
      return;
    }
    this.outage = { since: Date.now(), maxBuffered: buffered, droppedBefore: this.stats().dropped };
    this.logger.warn({ err: error, store: this.store, buffered }, `${this.store} history write failed; buffering and retrying`);
    this.emit('history:unavailable', { store: this.store, error, buffered });
  }

  private recovered(): void {
    this.failures = 0;
    const outage = this.outage;
    if (!outage) return;
    this.outage = undefined;
    const event = {
      store: this.store,
      outageMs: Date.now() - outage.since,
      maxBuffered: outage.maxBuffered,
      dropped: this.stats().dropped - outage.droppedBefore,
    };
    this.logger.info(event, `${this.store} history writable again after ${event.outageMs} ms`);
    this.emit('history:recovered', event);
  }

  private reportDrops(): void {
    for (const reason of Object.keys(this.unreported) as DropReason[]) {
      const count = this.unreported[reason];
      if (count === 0) continue;
      this.unreported[reason] = 0;
      const total = this.dropped[reason];
      this.logger.warn({ store: this.store, reason, count, total }, `${this.store} history dropped ${count} records (${reason})`);
      this.emit('history:dropped', { store: this.store, reason, count, total });
    }
  }

  private async doClose(): Promise<void> {
    this.closed = true;
    this.clearTimer();
    const deadline = Date.now() + this.batching.closeTimeoutMs;
    const left = () => deadline - Date.now();
    // closed stops the loop of run() after its write in flight; past that, flush without its back-off.
    while ((this.running || this.queue.length > 0) && left() > 0) {
      const step = this.running ?? this.flushOnce().then((ok) => (ok ? undefined : sleep(Math.min(this.batching.retryBaseMs, left()))));
      await raceDeadline(step, left());
    }
    const abandoned = this.queue.clear() + this.inFlight;
    if (abandoned > 0) this.drop(abandoned, 'closed');
    this.reportDrops();
    this.logger.debug(this.stats(), `${this.store} history writer closed`);
  }
}
