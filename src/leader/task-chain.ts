/**
 * The leader's one line of work: ticks, their enqueues, queue moves and triggers run one after the
 * other, so that one job's ledgers are written in fire order and no dispatch to a queue runs while
 * that queue is being moved. Tasks due later wait off the chain (a timer) and join it when due.
 */
import type { Logger } from '../shared/logger';
import type { Clock } from './fire-timer';

/** Serializes the leader's tasks. */
export class TaskChain {
  private tail: Promise<void> = Promise.resolve();
  /** Tasks waiting for their time (enqueues of committed fires, a lead before their nominal time). */
  private readonly deferred = new Set<unknown>();

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Runs `task` after everything queued; a failure is logged as `failure`. Resolves when it is done. */
  run(task: () => Promise<void>, failure: string): Promise<void> {
    this.tail = this.tail.then(task).catch((err) => this.log.error({ err }, failure));
    return this.tail;
  }

  /**
   * Runs `task` on the chain at `time`; when that has passed, at once and inline (the caller is on
   * the chain already). Waiting off the chain keeps other ticks and moves going; running on it
   * keeps them in order with the task. A failure is logged as `failure` either way, so the caller's
   * next tasks (a tick's other fire times) still run.
   */
  async at(time: number, task: () => Promise<void>, failure: string): Promise<void> {
    const wait = time - this.clock.now();
    if (wait <= 0) return task().catch((err) => this.log.error({ err }, failure));
    const handle = this.clock.setTimeout(() => {
      this.deferred.delete(handle);
      void this.run(task, failure);
    }, wait);
    this.deferred.add(handle);
  }

  /** Resolves once everything queued so far is done. */
  idle(): Promise<void> {
    return this.tail;
  }

  /** How many tasks wait for their time. */
  get waiting(): number {
    return this.deferred.size;
  }

  /** Drops the tasks waiting for their time. */
  cancelWaiting(): void {
    for (const handle of this.deferred) this.clock.clearTimeout(handle);
    this.deferred.clear();
  }

  /** Drops the tasks waiting for their time, and resolves once the chain is idle. */
  async close(): Promise<void> {
    this.cancelWaiting();
    await this.tail.catch(() => undefined);
  }
}
