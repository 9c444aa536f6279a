/**
 * Redis keys shardcron builds itself (BullMQ builds its queues' keys from QUEUE_PREFIX). Every key of
 * a namespace starts with {@link namespaceKeyPrefix}, so changing the layout is one function.
 */
import { assertJobName } from './registry-paths';

/**
 * The prefix of every shardcron key of `namespace`: `{shardcron:<namespace>}`. The braces are a
 * Redis Cluster hash tag: only the part inside them is hashed, so every key of a namespace lands in
 * one slot and a pipeline or MULTI over several jobs' keys stays legal on a cluster. Namespaces
 * (`[A-Za-z0-9][A-Za-z0-9_.-]*`) cannot contain a brace, so the tag cannot end early.
 */
export function namespaceKeyPrefix(namespace: string): string {
  return `{shardcron:${namespace}}`;
}

/**
 * The list of a job's most recent ExecutionRecords (JSON, newest first), e.g.
 * `{shardcron:prod}:executions:billing`. Throws a ConfigError naming `job` for an invalid job name.
 */
export function recentExecutionsKey(namespace: string, job: string): string {
  assertJobName(job, 'job');
  return `${namespaceKeyPrefix(namespace)}:executions:${job}`;
}
