/**
 * How far ahead of their nominal time fires are prepared (DESIGN.md flow 3b): planned and ledgered
 * the whole lead before, enqueued {@link DELIVERY_LEAD_MS} before, or, for a fire of many requests,
 * as long before as its enqueue is expected to take. The lead follows how long recent ticks took to
 * prepare and big fires to enqueue: twice the slowest of the last {@link LEAD_WINDOW}, within bounds.
 * While rarer jobs' fires burst behind frequent ones, every fire goes earlier ({@link BUSY_DELIVERY_LEAD_MS}).
 */
import { ErrorCodes, ShardcronError } from '../shared/errors';

/** Upper bound of the dispatch lead: below the shortest cron period (1 s), so a job's fires never overlap. */
export const MAX_DISPATCH_LEAD_MS = 800;
/**
 * How long before its nominal time a fire's requests are enqueued, at most (never more than the
 * lead), unless the fire is a big one ({@link DispatchLead.deliveryFor}) or rarer jobs burst
 * ({@link BUSY_DELIVERY_LEAD_MS}). Workers take an early
 * request into their prefetch and hold it until its time, its item locked meanwhile: the time a worker has to take a burst's requests before the fire (a worker
 * takes about 7 a millisecond on the bench machine). Not the whole lead (up to 800 ms when ticks
 * are slow to prepare): a worker's prefetch is bounded, and requests of the next fire held that
 * long took the places the tail of the current fire was waiting for. A big fire's enqueue itself
 * takes longer than this, so it begins earlier: its requests are behind the current fire's anyway.
 */
export const DELIVERY_LEAD_MS = 300;
/**
 * The delivery lead, and the least lead, while rarer jobs' fires burst behind frequent ones
 * ({@link DispatchLead.noteBurst}). A worker working through such a burst takes each request by a
 * fetch that waits on a busy Redis: a frequent job's fire enqueued {@link DELIVERY_LEAD_MS} ahead
 * was taken 300-900 ms after its time in the seconds after each minute's 20,000 fires
 * (bench/RESULTS.md, "Taken late, not started late"). Enqueued this long ahead, it is taken before
 * its time. Below {@link MAX_DISPATCH_LEAD_MS}, so a job's fires still never overlap.
 */
export const BUSY_DELIVERY_LEAD_MS = 700;
/** How long the busy lead lasts after the last burst (ms). */
export const BUSY_FOR_MS = 10 * 60_000;
/** How many recent tick preparations (and big enqueues) the lead adapts to. */
const LEAD_WINDOW = 8;
/**
 * An enqueue of at least this many requests is a big one: its pace (ms per request) sets how early
 * the next big fires are enqueued, and its duration counts towards the lead. Smaller ones take a few
 * milliseconds, well inside {@link DELIVERY_LEAD_MS}.
 */
export const BIG_ENQUEUE = 2_000;

/** The current lead and the recent preparation times it follows. */
export class DispatchLead {
  private current: number;
  private readonly durations: number[] = [];
  /** ms per request of the last {@link LEAD_WINDOW} big enqueues. */
  private readonly paces: number[] = [];
  /** Until when the busy lead ({@link BUSY_DELIVERY_LEAD_MS}) holds: {@link BUSY_FOR_MS} after the last burst. */
  private busyUntil = Number.NEGATIVE_INFINITY;

  /**
   * `minMs`: the lead when ticks prepare fast (default {@link DELIVERY_LEAD_MS}); a burst raises it
   * to {@link BUSY_DELIVERY_LEAD_MS} for a while even when set lower. `now`: the leader's clock.
   */
  constructor(
    private readonly minMs: number = DELIVERY_LEAD_MS,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(minMs) || minMs < 0 || minMs > MAX_DISPATCH_LEAD_MS) {
      throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `dispatchLeadMs must be an integer in [0, ${MAX_DISPATCH_LEAD_MS}], got ${String(minMs)}`);
    }
    this.current = minMs;
  }

  /** How long before its nominal time a fire is planned and ledgered. */
  get ms(): number {
    return this.current;
  }

  /** How long before its nominal time a prepared fire of a few requests is enqueued. */
  get deliveryMs(): number {
    return Math.min(this.current, this.busy() ? BUSY_DELIVERY_LEAD_MS : DELIVERY_LEAD_MS);
  }

  /**
   * A tick's rarer jobs went in chunks behind frequent ones: for the next {@link BUSY_FOR_MS} every
   * fire is planned and enqueued at least {@link BUSY_DELIVERY_LEAD_MS} ahead. Returns the lead
   * before, when it changed.
   */
  noteBurst(): number | undefined {
    this.busyUntil = this.now() + BUSY_FOR_MS;
    return this.settle();
  }

  private busy(): boolean {
    return this.now() < this.busyUntil;
  }

  /**
   * How long before its nominal time a prepared fire of `requests` requests is enqueued: as long as
   * the slowest recent big enqueue says it takes, so that the fire's last requests are in the queues
   * by its time, not a second after it; never more than the lead, never less than {@link deliveryMs}.
   */
  deliveryFor(requests: number): number {
    if (requests < BIG_ENQUEUE || this.paces.length === 0) return this.deliveryMs;
    const expected = Math.ceil(requests * Math.max(...this.paces));
    return Math.min(this.current, Math.max(this.deliveryMs, expected));
  }

  /** Notes how long an enqueue of `requests` requests took; returns the lead before, when a big one changed it. */
  noteEnqueue(requests: number, durationMs: number): number | undefined {
    if (requests < BIG_ENQUEUE) return undefined;
    this.paces.push(durationMs / requests);
    if (this.paces.length > LEAD_WINDOW) this.paces.shift();
    return this.adapt(durationMs);
  }

  /** Notes how long a tick took to prepare; returns the lead before, when it changed. */
  adapt(durationMs: number): number | undefined {
    this.durations.push(durationMs);
    if (this.durations.length > LEAD_WINDOW) this.durations.shift();
    return this.settle();
  }

  /** Sets the lead from the recent preparations and the busy lead; returns the lead before, when it changed. */
  private settle(): number | undefined {
    const wanted = this.durations.length === 0 ? 0 : Math.ceil(2 * Math.max(...this.durations));
    const least = this.busy() ? Math.max(this.minMs, BUSY_DELIVERY_LEAD_MS) : this.minMs;
    const next = Math.min(MAX_DISPATCH_LEAD_MS, Math.max(least, wanted));
    if (next === this.current) return undefined;
    const before = this.current;
    this.current = next;
    return before;
  }
}
