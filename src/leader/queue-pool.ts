import { Queue } from 'bullmq';
import { executionJobId, type ExecutionRequest } from '../shared/registry/execution-request';
import { forEachLimited } from '../shared/concurrency';
import type { RedisClient } from '../shared/redis/redis-connection';
import { QUEUE_PREFIX } from '../shared/registry/queue-names';
import { RecentEnqueues } from './recent-enqueues';

/*
 * Retention. A request's BullMQ job goes as soon as it completes, unless the operator keeps some for
 * Bull Board (SHARDCRON_COMPLETED_KEPT, the newest per queue; each completion then trims one). The
 * adds that could run a request a second time (a new leader's replay of each job's last ledgered
 * fire, failover intents it resumes, the reconcile after a Redis failover) are ignored by BullMQ
 * while the request waits or runs (its job id exists), and once it ran they reach the worker that ran
 * it, which remembers the item's last completed fires and skips them (ItemLock's `done`: ZooKeeper's
 * with monitorExecution, the process's without). Earlier versions kept every completed request for
 * 10 minutes instead, so that BullMQ would ignore the add: Redis memory then grew with throughput x
 * retention (docs/design-notes.md, "Redis memory").
 */

/** Failed requests kept per queue, the newest, for at most a day. */
const FAILED_KEPT_PER_QUEUE = 1_000;

/** Requests per addBulk call. */
export const ENQUEUE_CHUNK = 100;
/** addBulk calls in flight at once. */
const CHUNKS_IN_FLIGHT = 8;
/** Retention of failed requests, the same for every request. */
const REMOVE_ON_FAIL = { age: 24 * 3600, count: FAILED_KEPT_PER_QUEUE };

/** Jobs firing less often than this have their requests prioritized behind the more frequent ones' (rate-monotonic order). */
export const PRIORITIZED_FROM_PERIOD_MS = 60_000;
/** BullMQ's highest priority number (the lowest priority). */
const MAX_PRIORITY = 2_097_152;

/**
 * A request's BullMQ priority from its job's period, rate-monotonic: none (the queue's wait list,
 * taken first) below a minute or when the period is unknown (a one-shot cron, a job without one);
 * from a minute on, 1 + log2 of the period in minutes, whole (a minute 1, an hour 6, a day 11), so
 * that a consumer takes every queued request of a more frequent job before those of a rarer one.
 * BullMQ takes from its prioritized set only when the wait list is empty.
 */
export function priorityForPeriod(periodMs: number | undefined): number | undefined {
  if (periodMs === undefined || !Number.isFinite(periodMs) || periodMs < PRIORITIZED_FROM_PERIOD_MS) return undefined;
  return Math.min(MAX_PRIORITY, 1 + Math.floor(Math.log2(periodMs / PRIORITIZED_FROM_PERIOD_MS)));
}

/** The BullMQ priority of a request (see {@link priorityForPeriod}); undefined: none. */
export type RequestPriority = (request: ExecutionRequest) => number | undefined;

/** Requests per queue, from several enqueues, in one map (one addBulk per queue chunk for them all). */
export function mergeByQueue(parts: Iterable<ReadonlyMap<string, readonly ExecutionRequest[]>>): Map<string, ExecutionRequest[]> {
  const merged = new Map<string, ExecutionRequest[]>();
  for (const part of parts) {
    for (const [queue, requests] of part) {
      const list = merged.get(queue);
      if (list) list.push(...requests);
      else merged.set(queue, [...requests]);
    }
  }
  return merged;
}

/** A caller of {@link QueuePool.enqueueGathered} waiting for its turn's enqueue. */
interface Gathered {
  byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>;
  resolve(): void;
  reject(err: unknown): void;
}

/** One BullMQ Queue object per instance queue, over one shared Redis connection. */
export class QueuePool {
  private readonly queues = new Map<string, Queue>();
  /** Callers of {@link enqueueGathered} in this event-loop turn. */
  private gathered: Gathered[] = [];
  /** What was enqueued lately, for {@link RedisReconcile} (redis-reconcile.ts). */
  readonly recent = new RecentEnqueues();

  /** Retention of a request's job, the same for every request. */
  private readonly jobOptions: { removeOnComplete: true | { count: number }; removeOnFail: typeof REMOVE_ON_FAIL };

  /**
   * `prefix`: BullMQ's key prefix of the namespace's queues (queuePrefix in queue-names.ts);
   * `completedKept`: completed requests kept per queue (0: removed as they complete); `priorityOf`:
   * each request's priority, the same for every enqueue of it (a dispatch, a failover move, a replay).
   */
  constructor(
    readonly connection: RedisClient,
    readonly prefix: string = QUEUE_PREFIX,
    completedKept = 0,
    private readonly priorityOf: RequestPriority = () => undefined,
  ) {
    this.jobOptions = { removeOnComplete: completedKept > 0 ? { count: completedKept } : true, removeOnFail: REMOVE_ON_FAIL };
  }

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      // The shared connection's errors reach every queue on it; the connection's own listener logs
      // them once (createRedisClient), where BullMQ would print each queue's copy without one here.
      queue.on('error', () => undefined);
      this.queues.set(name, queue);
    }
    return queue;
  }

  /**
   * Enqueues requests: addBulk calls of at most {@link ENQUEUE_CHUNK} per queue, at most
   * {@link CHUNKS_IN_FLIGHT} at once. Each addBulk is one pipeline (BullMQ 6 adds each request by
   * its own script, not in one MULTI): chunks let workers start on the first requests of a big fire
   * while the rest are still being added, and a bounded number in flight keeps a 10,000-job fire's
   * BullMQ objects short-lived instead of all alive at once. Idempotent while a request waits or
   * runs (BullMQ ignores a job id it has); see the notes at the top of this file for after.
   */
  async enqueue(byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>): Promise<void> {
    const chunks: Array<{ queue: Queue; requests: readonly ExecutionRequest[] }> = [];
    for (const [name, requests] of byQueue) {
      const queue = this.get(name);
      for (let i = 0; i < requests.length; i += ENQUEUE_CHUNK) chunks.push({ queue, requests: requests.slice(i, i + ENQUEUE_CHUNK) });
    }
    await forEachLimited(chunks, CHUNKS_IN_FLIGHT, async ({ queue, requests }) => {
      await queue.addBulk(
        requests.map((request) => {
          const priority = this.priorityOf(request);
          const opts = { jobId: executionJobId(request), ...this.jobOptions, ...(priority !== undefined && { priority }) };
          return { name: request.job, data: request, opts };
        }),
      );
      this.recent.record(queue.name, requests);
    });
  }

  /**
   * {@link enqueue}, together with the other callers of this event-loop turn: their requests go
   * in shared addBulk calls. A new leader replays the last fire of each of thousands of jobs, one or
   * a few requests each; one addBulk per job cost 2.4-3.0 s of CPU for 20,000 of them, shared
   * calls of 100 requests 0.6 s. When the shared enqueue fails, each caller's requests go again on
   * their own, so that every caller gets the outcome it would have got alone (adding a request again
   * is harmless, as above).
   */
  enqueueGathered(byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.gathered.length === 0) setImmediate(() => void this.enqueueTurn());
      this.gathered.push({ byQueue, resolve, reject });
    });
  }

  private async enqueueTurn(): Promise<void> {
    const callers = this.gathered;
    this.gathered = [];
    if (callers.length === 1) return this.enqueue(callers[0].byQueue).then(callers[0].resolve, callers[0].reject);
    try {
      await this.enqueue(mergeByQueue(callers.map((caller) => caller.byQueue)));
      for (const caller of callers) caller.resolve();
    } catch {
      await forEachLimited(callers, CHUNKS_IN_FLIGHT, (caller) => this.enqueue(caller.byQueue).then(caller.resolve, caller.reject));
    }
  }

  async close(): Promise<void> {
    const queues = [...this.queues.values()];
    this.queues.clear();
    await Promise.allSettled(queues.map((q) => q.close()));
  }
}
