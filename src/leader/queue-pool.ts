import { Queue } from 'bullmq';
import { executionJobId, type ExecutionRequest } from '../shared/registry/execution-request';
import { forEachLimited } from '../shared/concurrency';
import type { RedisClient } from '../shared/redis/redis-connection';
import { QUEUE_PREFIX } from '../shared/registry/queue-names';
import { RecentEnqueues } from './recent-enqueues';

/**
 * How long completed requests stay in Redis. A new leader replays the last ledgered fire of each
 * job; BullMQ ignores an add whose job id exists, so the replay is a no-op only while the request
 * is still there. A takeover takes about one session timeout; ten minutes leaves a wide margin.
 * A ledger older than this is not replayed: its fire is treated as missed (misfire policy).
 */
export const REQUEST_RETENTION_MS = 10 * 60_000;

/** Requests per addBulk call. */
export const ENQUEUE_CHUNK = 100;
/** addBulk calls in flight at once. */
const CHUNKS_IN_FLIGHT = 8;
/** Retention of finished requests, the same for every request. */
const JOB_OPTIONS = { removeOnComplete: { age: Math.ceil(REQUEST_RETENTION_MS / 1000) }, removeOnFail: { age: 24 * 3600 } };

/** One BullMQ Queue object per instance queue, over one shared Redis connection. */
export class QueuePool {
  private readonly queues = new Map<string, Queue>();
  /** What was enqueued lately, for {@link RedisReconcile} (redis-reconcile.ts). */
  readonly recent = new RecentEnqueues();

  /** `prefix`: BullMQ's key prefix of the namespace's queues (queuePrefix in queue-names.ts). */
  constructor(
    readonly connection: RedisClient,
    readonly prefix: string = QUEUE_PREFIX,
  ) {}

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      this.queues.set(name, queue);
    }
    return queue;
  }

  /**
   * Enqueues requests: addBulk calls of at most {@link ENQUEUE_CHUNK} per queue, at most
   * {@link CHUNKS_IN_FLIGHT} at once. Each addBulk is one MULTI, invisible to workers until it has
   * run whole: chunks let workers start on the first requests of a big fire while the rest are
   * still being added, and a bounded number in flight keeps a 10,000-job fire's BullMQ objects
   * short-lived instead of all alive at once. Idempotent by job id.
   */
  async enqueue(byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>): Promise<void> {
    const chunks: Array<{ queue: Queue; requests: readonly ExecutionRequest[] }> = [];
    for (const [name, requests] of byQueue) {
      const queue = this.get(name);
      for (let i = 0; i < requests.length; i += ENQUEUE_CHUNK) chunks.push({ queue, requests: requests.slice(i, i + ENQUEUE_CHUNK) });
    }
    await forEachLimited(chunks, CHUNKS_IN_FLIGHT, async ({ queue, requests }) => {
      await queue.addBulk(requests.map((request) => ({ name: request.job, data: request, opts: { jobId: executionJobId(request), ...JOB_OPTIONS } })));
      this.recent.record(queue.name, requests);
    });
  }

  async close(): Promise<void> {
    const queues = [...this.queues.values()];
    this.queues.clear();
    await Promise.allSettled(queues.map((q) => q.close()));
  }
}
