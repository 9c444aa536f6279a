/**
 * The names of a namespace's keys in Redis: its BullMQ queues and any other key shardcron writes.
 *
 * On a Redis Cluster every key of a namespace must hash to one slot: BullMQ's Lua scripts touch
 * several keys of a queue at once, and a script's keys must share a slot. The hash tag `{namespace}`
 * does that (Redis hashes only what is between the first `{` and `}`): one namespace = one slot =
 * one shard. Load is spread over a Cluster's shards by namespaces.
 *
 * Queues: tagged (`shardcron:{ns}`) only on a Cluster, where nothing older exists; without one,
 * BullMQ's prefix stays `shardcron`, as in every release before Cluster support, so a rolling upgrade
 * keeps old and new nodes on the same queue keys (docs/design-notes.md, "Redis key prefix").
 * Any other key (an execution-history list, ...): always under {@link namespaceKeyPrefix}.
 */
import { redisTopology, type RedisTarget } from '../redis/redis-target';

/** BullMQ key prefix of every shardcron queue without a Redis Cluster; namespaces are kept apart by the queue name. */
export const QUEUE_PREFIX = 'shardcron';

/**
 * The prefix of every Redis key of `namespace` that is not a BullMQ queue's: `shardcron:{namespace}`,
 * whatever the topology. Build a key as `${namespaceKeyPrefix(ns)}:${what}:${...}`, e.g.
 * `shardcron:{billing}:recent:settle-accounts`, with a `what` that has no dot: the hash tag keeps it
 * in the namespace's slot on a Cluster, and tagged queue keys go on after the same prefix with the
 * queue name `{namespace}.{instance}.{incarnation}:`, which always has a dot before its first `:`.
 */
export function namespaceKeyPrefix(namespace: string): string {
  return `${QUEUE_PREFIX}:{${namespace}}`;
}

/**
 * BullMQ's `prefix` option for the queues of `namespace` on `target`: {@link namespaceKeyPrefix} on a
 * Cluster, {@link QUEUE_PREFIX} otherwise. Every node of a namespace must be given the same kind of
 * target, or they would not find each other's queues.
 */
export function queuePrefix(namespace: string, target: RedisTarget): string {
  return redisTopology(target) === 'cluster' ? namespaceKeyPrefix(namespace) : QUEUE_PREFIX;
}

/**
 * A field shardcron adds to a queue's BullMQ `meta` hash (which its obliteration deletes): set by a
 * worker at the end of its close, after its consumers closed, so that what still waits in the queue
 * is what it handed back (never run there, or aborted at the end of the grace period); the leader
 * moves that with failover off too (failover.ts).
 */
export const DRAINED_FIELD = 'shardcron:drained';

/**
 * The queue of one instance incarnation. A new incarnation (after a lost session) gets a new
 * queue, so requests meant for the old one can never be taken by the new one by mistake.
 * BullMQ forbids ':' in queue names; IPv6 instance ids have them.
 */
export function instanceQueueName(namespace: string, instanceId: string, incarnation: string): string {
  return `${namespace}.${instanceId}.${incarnation}`.replace(/:/g, '_');
}

/**
 * A SCAN pattern matching the `meta` key of every queue of `namespace` under `prefix`, and the way
 * back from such a key to its queue name. Glob characters in a namespace (`[`, `?`, `*` cannot occur:
 * see parseNamespace) need no escaping; `{` and `}` are not special to SCAN.
 */
export function queueMetaKeys(prefix: string, namespace: string): { pattern: string; queueOf(key: string): string } {
  return {
    pattern: `${prefix}:${namespace}.*:meta`,
    queueOf: (key) => key.slice(prefix.length + 1, -':meta'.length),
  };
}
