import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { executionJobId, type ExecutionRequest } from '../shared/execution-request';
import { QUEUE_PREFIX } from '../shared/queue-names';

/**
 * How long completed requests stay in Redis. A new leader replays the last ledgered fire of each
 * job; BullMQ ignores an add whose job id exists, so the replay is a no-op only while the request
 * is still there. A takeover takes about one session timeout; ten minutes leaves a wide margin.
 * A ledger older than this is not replayed: its fire is treated as missed (misfire policy).
 */
export const REQUEST_RETENTION_MS = 10 * 60_000;

/** One BullMQ Queue object per instance queue, over one shared Redis connection. */
export class QueuePool {
  private readonly queues = new Map<string, Queue>();

  constructor(private readonly connection: Redis) {}

  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.connection, prefix: QUEUE_PREFIX });
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** Enqueues requests, one addBulk per queue, all queues in parallel. Idempotent by job id. */
  async enqueue(byQueue: ReadonlyMap<string, readonly ExecutionRequest[]>): Promise<void> {
    const age = Math.ceil(REQUEST_RETENTION_MS / 1000);
    await Promise.all(
      [...byQueue].map(([name, requests]) =>
        this.get(name).addBulk(
          requests.map((request) => ({
            name: request.job,
            data: request,
            opts: { jobId: executionJobId(request), removeOnComplete: { age }, removeOnFail: { age: 24 * 3600 } },
          })),
        ),
      ),
    );
  }

  async close(): Promise<void> {
    const queues = [...this.queues.values()];
    this.queues.clear();
    await Promise.allSettled(queues.map((q) => q.close()));
  }
}
