/**
 * The leader's one line of work: ticks, their enqueues, queue moves and triggers run one after the
 * other, so that one job's ledgers are written in fire order and no dispatch to a queue runs while
 * that queue is being moved. Tasks due later wait off the chain (a timer) and join it when due.
 *
 * The chain has two lanes. Everything goes in the first, in the order queued, but for the rest of a
 * big tick of jobs firing once a minute or less often (its later chunks and their enqueues), which
 * goes in the lane behind: a task of that lane runs only when the first lane has nothing queued, or,
 * once the lane behind has a task that waited {@link BEHIND_MAX_WAIT_MS}, every other turn until
 * that lane is empty. So the ticks of frequent jobs that come due while 20,000 every-minute jobs are
 * dispatched wait for one chunk at most, not for every chunk ledgered before them
 * (docs/design-notes.md, "Frequent jobs while many fire at once").
 */
import type { Logger } from '../shared/logger';
import type { Clock } from './fire-timer';

/** Which lane a task goes in: `first` (the default), or `behind` (runs when the first has nothing). */
export type Lane = 'first' | 'behind';

/**
 * How long a task of the lane behind waits, at most, while the first lane always has work: the two
 * lanes then take turns until the lane behind is empty. Only a leader that cannot keep up with its
 * frequent jobs gets there.
 */
export const BEHIND_MAX_WAIT_MS = 1_000;

interface Entry {
  task: () => Promise<void>;
  failure: string;
  queuedAt: number;
  done: () => void;
}

/** Serializes the leader's tasks. */
export class TaskChain {
  private readonly lanes: Record<Lane, Entry[]> = { first: [], behind: [] };
  private running = false;
  /** The lane of the task that ran last (the turns of an overdue lane behind). */
  private lastLane: Lane = 'first';
  /** A task behind waited too long: the lanes take turns until the lane behind is empty. */
  private behindOverdue = false;
  /** Tasks waiting for their time (enqueues of committed fires, a lead before their nominal time). */
  private readonly deferred = new Set<unknown>();

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /**
   * Runs `task` after everything queued in `lane` (and, for the lane behind, when the first has
   * nothing queued); a failure is logged as `failure`. Resolves when it is done.
   */
  run(task: () => Promise<void>, failure: string, lane: Lane = 'first'): Promise<void> {
    return new Promise((done) => {
      this.lanes[lane].push({ task, failure, queuedAt: this.clock.now(), done });
      this.next();
    });
  }

  /**
   * Runs `task` on the chain, in `lane`, at `time`; when that has passed, at once and inline (the
   * caller is on the chain already), or, with `inline` false, queued in `lane`. Waiting off the
   * chain keeps other ticks and moves going; running on it keeps them in order with the task. A
   * failure is logged as `failure` either way, so the caller's next tasks (a tick's other fire
   * times) still run.
   */
  async at(time: number, task: () => Promise<void>, failure: string, lane: Lane = 'first', inline = true): Promise<void> {
    const wait = time - this.clock.now();
    if (wait <= 0) {
      if (inline) return task().catch((err) => this.log.error({ err }, failure));
      void this.run(task, failure, lane);
      return;
    }
    const handle = this.clock.setTimeout(() => {
      this.deferred.delete(handle);
      void this.run(task, failure, lane);
    }, wait);
    this.deferred.add(handle);
  }

  /** Resolves once everything queued so far, in either lane, is done. */
  async idle(): Promise<void> {
    await Promise.all([this.run(noop, 'idle', 'first'), this.run(noop, 'idle', 'behind')]);
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
    await this.idle();
  }

  /**
   * Starts the next task, unless one runs, in a microtask as a task queued on a promise chain
   * would; which one is chosen then, with whatever was queued in the same turn.
   */
  private next(): void {
    if (this.running) return;
    this.running = true;
    void Promise.resolve().then(() => this.runNext());
  }

  private async runNext(): Promise<void> {
    const lane = this.laneNext();
    if (lane === undefined) {
      this.running = false;
      return;
    }
    const entry = this.lanes[lane].shift()!;
    this.lastLane = lane;
    try {
      await entry.task();
    } catch (err) {
      try {
        this.log.error({ err }, entry.failure);
      } catch {
        // A logger that throws does not stop the chain.
      }
    }
    this.running = false;
    entry.done();
    this.next();
  }

  private laneNext(): Lane | undefined {
    const behind = this.lanes.behind[0];
    if (behind === undefined) {
      this.behindOverdue = false;
      return this.lanes.first.length > 0 ? 'first' : undefined;
    }
    if (this.lanes.first.length === 0) return 'behind';
    // A wall clock stepped back counts as overdue: taking turns early costs the frequent ticks little.
    const waited = this.clock.now() - behind.queuedAt;
    if (waited >= BEHIND_MAX_WAIT_MS || waited < 0) this.behindOverdue = true;
    return this.behindOverdue && this.lastLane === 'first' ? 'behind' : 'first';
  }
}

const noop = (): Promise<void> => Promise.resolve();
