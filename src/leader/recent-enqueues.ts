/**
 * What the leader enqueued within the last {@link RECONCILE_WINDOW_MS}: recorded by QueuePool's
 * enqueue path, read by RedisReconcile (redis-reconcile.ts) when Redis may have lost some of it.
 */
import type { ExecutionRequest } from '../shared/registry/execution-request';

/**
 * How far back a reconcile looks. It must exceed the replication lag a failover can lose, which
 * `min-replicas-max-lag` bounds (docs/deployment.md recommends 10 s). A request re-added after it
 * ran (its job went when it completed) is skipped by the worker that ran it, which remembers each
 * item's last 32 completed fires: a job fires at most once a second, so the window holds at most 15
 * of an item's scheduled fires.
 */
export const RECONCILE_WINDOW_MS = 15_000;
/** Most requests remembered: a leader enqueuing more than this per window reconciles only the latest. */
export const MAX_REMEMBERED = 100_000;

/** One addBulk's requests: one entry per chunk (at most ENQUEUE_CHUNK), not per request, to keep the leader's heap small. */
interface Entry {
  readonly at: number;
  readonly queue: string;
  readonly requests: readonly ExecutionRequest[];
}

/** The requests enqueued within the window, oldest first. */
export class RecentEnqueues {
  private entries: Entry[] = [];
  private head = 0;
  private count = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Called after an addBulk of `requests` to `queue` succeeded; keeps a reference to the array. */
  record(queue: string, requests: readonly ExecutionRequest[]): void {
    const at = this.now();
    this.entries.push({ at, queue, requests });
    this.count += requests.length;
    this.prune(at);
  }

  /** The requests still within the window, by queue, in the order they were enqueued. */
  byQueue(): Map<string, ExecutionRequest[]> {
    this.prune(this.now());
    const out = new Map<string, ExecutionRequest[]>();
    for (let i = this.head; i < this.entries.length; i += 1) {
      const { queue, requests } = this.entries[i];
      const list = out.get(queue);
      if (list) list.push(...requests);
      else out.set(queue, [...requests]);
    }
    return out;
  }

  /** Requests remembered. */
  get size(): number {
    return this.count;
  }

  private prune(now: number): void {
    while (this.head < this.entries.length && (this.entries[this.head].at < now - RECONCILE_WINDOW_MS || this.count > MAX_REMEMBERED)) {
      this.count -= this.entries[this.head].requests.length;
      this.head += 1;
    }
    // Compact once the dropped head is the larger part: amortised O(1) per entry.
    if (this.head > 1_024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
