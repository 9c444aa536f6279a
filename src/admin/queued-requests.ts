/**
 * The execution requests of one job in Redis, across every instance queue of a namespace, and their
 * removal: what is left to do once a job's ZooKeeper subtree is gone (DESIGN.md flow 10).
 */
import { Queue, type JobType } from 'bullmq';
import type { RedisClient } from '../shared/redis/redis-connection';
import { namespaceQueues } from '../shared/redis/namespace-queues';
import type { Logger } from '../shared/logger';

/** One request left in a queue. */
export interface QueuedRequestRef {
  queue: string;
  /** BullMQ job id (`{job}|{fireTime}|{item}...`). */
  id: string;
}

/** What {@link removeJobRequests} did. */
export interface RequestRemoval {
  /** Requests removed (waiting, delayed, prioritized, paused, active but not locked, completed, failed). */
  removed: number;
  /** Requests a worker still holds the lock of (it runs them, or took them ahead of their fire): not removed. */
  locked: QueuedRequestRef[];
}

/**
 * Every state a request can be found in. `paused` is the list of a paused queue in older BullMQ
 * versions (BullMQ 6 pauses with a flag and keeps `wait`); the getRanges script still reads it.
 */
const STATES = ['wait', 'paused', 'prioritized', 'delayed', 'active', 'completed', 'failed', 'waiting-children'] as unknown as JobType[];

/** Ids read per `getRanges` page and names read per pipeline. */
const PAGE = 1000;

/** Ids of `queue`'s requests of `job`, in every state: ids page by page, then their BullMQ job names. */
async function requestIdsOf(queue: Queue, redis: RedisClient, job: string): Promise<string[]> {
  const ids = [...new Set(await queue.getRanges(STATES, 0, -1))];
  const matching: string[] = [];
  for (let i = 0; i < ids.length; i += PAGE) {
    const page = ids.slice(i, i + PAGE);
    const pipeline = redis.pipeline();
    for (const id of page) pipeline.hget(queue.toKey(id), 'name');
    const names = (await pipeline.exec()) ?? [];
    page.forEach((id, k) => {
      const [err, name] = names[k] ?? [];
      if (!err && name === job) matching.push(id);
    });
  }
  return matching;
}

/**
 * One pass over every queue of the namespace: removes each request whose BullMQ job name is `job`
 * (the leader names them after their job) with BullMQ's own removal script, which refuses a request
 * whose lock a worker holds; those are returned as `locked`.
 */
export async function removeJobRequests(redis: RedisClient, prefix: string, namespace: string, job: string, log: Logger): Promise<RequestRemoval> {
  const result: RequestRemoval = { removed: 0, locked: [] };
  for (const name of await namespaceQueues(redis, prefix, namespace)) {
    const queue = new Queue(name, { connection: redis, prefix });
    queue.on('error', (err) => log.warn({ err, queue: name }, 'queue error'));
    try {
      for (const id of await requestIdsOf(queue, redis, job)) {
        if ((await queue.remove(id, { removeChildren: false })) === 1) result.removed += 1;
        else if (await queue.getJob(id)) result.locked.push({ queue: name, id });
      }
    } finally {
      await queue.close();
    }
  }
  return result;
}
