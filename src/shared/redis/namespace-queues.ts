/**
 * The BullMQ queues of a namespace found in Redis, whoever owns them: what the leader scans for
 * queues of instances that died unwatched, and what a job's removal searches for its requests.
 */
import { Cluster } from 'ioredis';
import { queueMetaKeys } from '../registry/queue-names';
import type { RedisClient } from './redis-connection';

/**
 * The names of `namespace`'s queues under BullMQ prefix `prefix` that hold or held requests (BullMQ
 * writes a queue's `meta` hash with its first request), sorted. On a Cluster, SCAN sees one node's
 * keys only, so every primary is scanned (the namespace's keys are all on the one owning its hash
 * tag's slot, wherever resharding has put it). A namespace that is a dotted prefix of another (`a`
 * and `a.b`) cannot be told apart here: give namespaces names that are not.
 */
export async function namespaceQueues(redis: RedisClient, prefix: string, namespace: string): Promise<string[]> {
  const found = new Set<string>();
  const keys = queueMetaKeys(prefix, namespace);
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    for await (const batch of node.scanStream({ match: keys.pattern, count: 500 }) as AsyncIterable<string[]>) {
      for (const key of batch) found.add(keys.queueOf(key));
    }
  }
  return [...found].sort();
}
