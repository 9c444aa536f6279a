import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';

/** What the timer needs of a cron schedule (src/shared/cron/cron.ts's parseCron returns such an object). */
export interface FireSchedule {
  /** First nominal fire time strictly after `afterMs` (epoch ms), or null if it never fires again. */
  next(afterMs: number): number | null;
}

/** The time source and timer primitives, injected so tests drive time by hand. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The wall clock and Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** One job that is due at a wake-up. */
export interface DueJob {
  job: string;
  /** Every nominal fire time that is now due for this job, oldest first (capped at `maxCatchUp`, default 100). Normally one. */
  fireTimes: number[];
  /**
   * true when more than maxCatchUp were due (the list was cut). The due times after the last one
   * listed are skipped: the job's next fire is then its first one after the wake-up.
   */
  truncated: boolean;
}

/** Options of a {@link FireTimer}. */
export interface FireTimerOptions {
  /** Time source; default {@link systemClock}. */
  clock?: Clock;
  /**
   * Receives every job due at one wake-up in one call, sorted by first fire time then job name.
   * Exceptions and rejected promises are logged; the timer does not wait for a returned promise.
   */
  onDue: (due: DueJob[], now: number) => void | Promise<void>;
  /** Longest single sleep, so a wall-clock jump forward is noticed within it; default 1000 ms. */
  maxSleepMs?: number;
  /** `now` going back by more than this between wake-ups is a backward clock jump; default 1000 ms. */
  jumpToleranceMs?: number;
  logger?: Logger;
  /** Most fire times delivered for one job at one wake-up; default 100. */
  maxCatchUp?: number;
}

/** `idle` until start(), `running` while armed, `closed` for good. */
export type FireTimerState = 'idle' | 'running' | 'closed';

interface Entry {
  readonly job: string;
  schedule: FireSchedule;
  /** Next nominal fire time: the heap key. */
  next: number;
  /** Last nominal fire time delivered; survives replacement so a job's times never go back. */
  last: number | undefined;
  /** Position in the heap, so replace and remove are O(log n) without a scan. */
  index: number;
}

// Node clamps larger delays to 1 ms, which would turn a long sleep into a busy loop.
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * The one timer of a leader: every job's next fire time in a binary min-heap (keyed by fire time,
 * then job name) and a single underlying timeout armed for the earliest entry, so tens of thousands
 * of jobs cost one timer. schedule/unschedule are O(log n); a wake-up with k due jobs is
 * O(k log n) plus the next() calls of those jobs.
 *
 * Timers are not trusted. A wake-up only ever compares the heap with `clock.now()`: an early one
 * delivers nothing and re-arms; a late one (blocked event loop, suspended machine) delivers every
 * due time of each job; sleeps are capped at `maxSleepMs` so a forward wall-clock jump is seen as a
 * late wake-up; after a backward jump entries keep their fire times and the timer waits for the
 * clock to reach them. Whatever the clock does, a job's delivered times strictly increase.
 * The timer has no misfire policy: the leader decides what several due times mean.
 */
export class FireTimer {
  private readonly clock: Clock;
  private readonly onDue: FireTimerOptions['onDue'];
  private readonly maxSleepMs: number;
  private readonly jumpToleranceMs: number;
  private readonly maxCatchUp: number;
  private readonly log: Logger;
  private readonly entries = new Map<string, Entry>();
  private readonly heap: Entry[] = [];
  private stateValue: FireTimerState = 'idle';
  private handle: unknown = undefined;
  /** When the armed timeout should fire; a wake-up far past it was late. */
  private deadline = Number.POSITIVE_INFINITY;
  private lastObservedNow: number | undefined;
  private delivering = false;

  constructor(options: FireTimerOptions) {
    const issues: FieldIssue[] = [];
    const check = (field: string, value: number, ok: boolean, rule: string): number => {
      if (!ok) issues.push({ field, message: `must be ${rule}, got ${String(value)}` });
      return value;
    };
    const maxSleepMs = options.maxSleepMs ?? 1_000;
    const jumpToleranceMs = options.jumpToleranceMs ?? 1_000;
    const maxCatchUp = options.maxCatchUp ?? 100;
    this.maxSleepMs = check('maxSleepMs', maxSleepMs, Number.isInteger(maxSleepMs) && maxSleepMs >= 1 && maxSleepMs <= MAX_TIMEOUT_MS, `an integer in [1, ${MAX_TIMEOUT_MS}]`);
    this.jumpToleranceMs = check('jumpToleranceMs', jumpToleranceMs, Number.isFinite(jumpToleranceMs) && jumpToleranceMs >= 0, 'a finite number >= 0');
    this.maxCatchUp = check('maxCatchUp', maxCatchUp, Number.isInteger(maxCatchUp) && maxCatchUp >= 1, 'an integer >= 1');
    if (typeof options.onDue !== 'function') issues.push({ field: 'onDue', message: 'must be a function' });
    if (issues.length > 0) throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid FireTimer options', issues);
    this.clock = options.clock ?? systemClock;
    this.onDue = options.onDue;
    this.log = (options.logger ?? silentLogger).child({ component: 'fire-timer' });
  }

  /** Lifecycle state. */
  get state(): FireTimerState {
    return this.stateValue;
  }

  /**
   * Adds or replaces a job. `after` (default now) = the last nominal fire time already handled for
   * it; the next fire is schedule.next(after). A fire time at or before now is delivered at the next
   * wake-up (with every other due time: a catch-up). When replacing, `after` is raised to the last
   * time already delivered, so nothing is delivered twice. If schedule.next() throws, the error
   * propagates and the timer is unchanged; if it returns null, the job is removed.
   */
  schedule(job: string, schedule: FireSchedule, after?: number): void {
    const existing = this.entries.get(job);
    let from = after ?? this.clock.now();
    if (!Number.isFinite(from)) {
      throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `FireTimer.schedule: after must be a finite epoch ms, got ${String(from)} (job ${job})`, { job });
    }
    if (existing?.last !== undefined && existing.last > from) from = existing.last;
    const next = schedule.next(from);
    if (next === null) {
      this.unschedule(job);
      this.log.info({ job }, 'schedule never fires again; job not scheduled');
      return;
    }
    if (!Number.isFinite(next) || next <= from) {
      throw new ShardcronError(ErrorCodes.INVALID_CRON, `schedule of job ${job} returned ${String(next)} as the next fire after ${from}; it must be later`, { job, after: from, next });
    }
    if (existing) {
      existing.schedule = schedule;
      this.update(existing, next);
    } else {
      const entry: Entry = { job, schedule, next, last: undefined, index: this.heap.length };
      this.entries.set(job, entry);
      this.heap.push(entry);
      this.siftUp(entry.index);
    }
    // Re-arm only when this job must wake us sooner than the armed timeout: scheduling 10,000 jobs
    // must not cost 10,000 clearTimeout/setTimeout pairs.
    if (this.heap[0]?.job === job && (this.handle === undefined || next < this.deadline)) this.arm();
  }

  /** Removes a job (no-op if unknown). Safe inside onDue. */
  unschedule(job: string): void {
    const entry = this.entries.get(job);
    if (!entry) return;
    this.entries.delete(job);
    this.removeAt(entry.index);
    // A timeout armed for the removed entry just wakes early and re-arms; only an empty heap needs none.
    if (this.heap.length === 0) this.disarm();
  }

  /** Next nominal fire time of a job, or undefined if it is not scheduled. */
  nextFireTime(job: string): number | undefined {
    return this.entries.get(job)?.next;
  }

  /** Last nominal fire time handed out for the job (undefined before its first delivery). */
  lastFireTime(job: string): number | undefined {
    return this.entries.get(job)?.last;
  }

  /** Number of scheduled jobs. */
  size(): number {
    return this.heap.length;
  }

  /** Arms the timer. Jobs may be scheduled before; idempotent; throws once closed. */
  start(): void {
    if (this.stateValue === 'running') return;
    if (this.stateValue === 'closed') throw new ShardcronError(ErrorCodes.CLOSED, 'FireTimer.start: the timer is closed; create a new one');
    this.transition('running');
    this.lastObservedNow = this.clock.now();
    this.arm();
  }

  /** Stops for good and clears the timeout; onDue is never called again. Idempotent. */
  close(): void {
    if (this.stateValue === 'closed') return;
    this.transition('closed');
    this.disarm();
  }

  /** Same as close(). */
  [Symbol.dispose](): void {
    this.close();
  }

  // ---- wake-up ----------------------------------------------------------------------------

  private wake(): void {
    this.handle = undefined;
    if (this.stateValue !== 'running') return;
    const now = this.clock.now();
    this.observe(now);
    const due = this.collectDue(now);
    if (due.length > 0) this.deliver(due, now);
    this.arm();
  }

  private observe(now: number): void {
    const previous = this.lastObservedNow;
    // Compared with the previous observation, not the highest one, so one jump warns once even
    // though the clock stays behind for a while.
    if (previous !== undefined && now < previous - this.jumpToleranceMs) {
      this.log.warn({ jumpMs: previous - now, now, previous }, 'wall clock jumped backward; fire times already delivered will not be delivered again, waiting for the clock to reach the next ones');
    } else if (now - this.deadline > this.jumpToleranceMs) {
      this.log.warn({ lateMs: now - this.deadline, now }, 'timer woke late (event loop blocked, machine suspended or clock jumped forward); delivering every due fire time');
    }
    this.lastObservedNow = now;
  }

  /**
   * Pops every entry due at `now` (in heap order, which is the delivery order) and puts each back
   * with its next fire after `now`. All bookkeeping is done before onDue runs, so onDue sees
   * consistent next/last times and may reschedule or remove any job.
   */
  private collectDue(now: number): DueJob[] {
    const due: DueJob[] = [];
    while (this.heap.length > 0 && this.heap[0].next <= now) {
      const entry = this.heap[0];
      const fireTimes = [entry.next];
      let truncated = false;
      let next = this.nextOf(entry, entry.next);
      while (next !== null && next <= now) {
        if (fireTimes.length === this.maxCatchUp) {
          // Walking every missed time (a week of per-second fires) would stall the leader; the
          // leader applies its misfire policy to the listed ones and the rest are skipped.
          truncated = true;
          next = this.nextOf(entry, now);
          break;
        }
        fireTimes.push(next);
        next = this.nextOf(entry, next);
      }
      entry.last = fireTimes[fireTimes.length - 1];
      due.push({ job: entry.job, fireTimes, truncated });
      if (next === null) {
        this.entries.delete(entry.job);
        this.removeAt(0);
      } else {
        // next > now (nextOf guarantees it is later than its argument), so the loop cannot pop it again.
        this.update(entry, next);
      }
    }
    return due;
  }

  /** schedule.next(), guarded: a throwing or non-advancing schedule would stall or loop the timer. */
  private nextOf(entry: Entry, after: number): number | null {
    let next: number | null;
    try {
      next = entry.schedule.next(after);
    } catch (err) {
      this.log.error({ err, job: entry.job, after }, 'schedule.next threw; job removed from the timer');
      return null;
    }
    if (next === null) {
      this.log.info({ job: entry.job, after }, 'schedule never fires again; job removed from the timer');
      return null;
    }
    if (!Number.isFinite(next) || next <= after) {
      this.log.error({ job: entry.job, after, next }, 'schedule.next did not return a later time; job removed from the timer');
      return null;
    }
    return next;
  }

  private deliver(due: DueJob[], now: number): void {
    // While onDue runs, re-entrant schedule() calls must not arm: wake() arms once afterwards.
    this.delivering = true;
    try {
      const result: unknown = this.onDue(due, now);
      if (result instanceof Promise) {
        result.catch((err: unknown) => this.log.error({ err, jobs: due.length }, 'onDue rejected'));
      }
    } catch (err) {
      this.log.error({ err, jobs: due.length }, 'onDue threw; the timer goes on');
    } finally {
      this.delivering = false;
    }
  }

  private arm(): void {
    if (this.stateValue !== 'running' || this.delivering) return;
    this.disarm();
    const top = this.heap[0];
    if (!top) return;
    const now = this.clock.now();
    // Capped so a forward wall-clock jump (or a suspend) is noticed within maxSleepMs.
    const delay = Math.min(Math.max(top.next - now, 0), this.maxSleepMs);
    this.deadline = now + delay;
    this.handle = this.clock.setTimeout(() => this.wake(), delay);
  }

  private disarm(): void {
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle);
    this.handle = undefined;
    this.deadline = Number.POSITIVE_INFINITY;
  }

  private transition(to: FireTimerState): void {
    this.log.debug({ from: this.stateValue, to, jobs: this.heap.length }, 'fire timer state');
    this.stateValue = to;
  }

  // ---- binary min-heap with an index per entry ----------------------------------------------

  private update(entry: Entry, next: number): void {
    const earlier = next < entry.next;
    entry.next = next;
    if (earlier) this.siftUp(entry.index);
    else this.siftDown(entry.index);
  }

  private removeAt(index: number): void {
    const removed = this.heap[index];
    const last = this.heap.pop() as Entry;
    removed.index = -1;
    if (last === removed) return;
    this.heap[index] = last;
    last.index = index;
    this.siftUp(index);
    this.siftDown(last.index);
  }

  private less(a: Entry, b: Entry): boolean {
    return a.next < b.next || (a.next === b.next && a.job < b.job);
  }

  private siftUp(index: number): void {
    const heap = this.heap;
    const entry = heap[index];
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = heap[parentIndex];
      if (!this.less(entry, parent)) break;
      heap[index] = parent;
      parent.index = index;
      index = parentIndex;
    }
    heap[index] = entry;
    entry.index = index;
  }

  private siftDown(index: number): void {
    const heap = this.heap;
    const entry = heap[index];
    const half = heap.length >> 1;
    while (index < half) {
      let childIndex = 2 * index + 1;
      const right = childIndex + 1;
      if (right < heap.length && this.less(heap[right], heap[childIndex])) childIndex = right;
      const child = heap[childIndex];
      if (!this.less(child, entry)) break;
      heap[index] = child;
      child.index = index;
      index = childIndex;
    }
    heap[index] = entry;
    entry.index = index;
  }
}
