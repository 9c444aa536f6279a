/**
 * `shardcron_queue_depth{queue}`: requests waiting, delayed, prioritized or running in each live
 * instance queue, read when Prometheus scrapes. One pipeline for every queue rather than BullMQ's
 * getJobCounts per queue (a round trip each): a scrape of a hundred instances stays one round trip.
 * On a Redis Cluster every queue key of the namespace shares the `{namespace}` hash tag, so the
 * pipeline goes to one node.
 */
import type { Cluster, Redis } from 'ioredis';

/** BullMQ's keys of one queue that hold requests not finished yet: lists, then sorted sets. */
const LIST_KEYS = ['wait', 'paused', 'active'] as const;
const SORTED_SET_KEYS = ['delayed', 'prioritized'] as const;

/** How many requests each of `queues` holds that have not finished, in one pipeline. */
export async function queueDepths(redis: Redis | Cluster, prefix: string, queues: readonly string[]): Promise<Map<string, number>> {
  const depths = new Map<string, number>();
  if (queues.length === 0) return depths;
  const pipeline = redis.pipeline();
  for (const queue of queues) {
    for (const key of LIST_KEYS) pipeline.llen(`${prefix}:${queue}:${key}`);
    for (const key of SORTED_SET_KEYS) pipeline.zcard(`${prefix}:${queue}:${key}`);
  }
  const replies = (await pipeline.exec()) ?? [];
  const perQueue = LIST_KEYS.length + SORTED_SET_KEYS.length;
  queues.forEach((queue, i) => {
    let depth = 0;
    for (let k = 0; k < perQueue; k += 1) {
      const [err, count] = replies[i * perQueue + k] ?? [null, 0];
      if (err) throw err;
      depth += Number(count) || 0;
    }
    depths.set(queue, depth);
  });
  return depths;
}
