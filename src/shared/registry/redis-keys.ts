/**
 * Redis keys shardcron builds itself (BullMQ builds its queues' keys from the queue prefix). Every key
 * of a namespace starts with {@link namespaceKeyPrefix} (queue-names.ts), so it shares the namespace's
 * hash slot on a Cluster and changing the layout is one function.
 */
import { namespaceKeyPrefix } from './queue-names';
import { assertJobName } from './registry-paths';

/**
 * The list of a job's most recent ExecutionRecords (JSON, newest first), e.g.
 * `shardcron:{prod}:executions:billing`. Throws a ConfigError naming `job` for an invalid job name.
 */
export function recentExecutionsKey(namespace: string, job: string): string {
  assertJobName(job, 'job');
  return `${namespaceKeyPrefix(namespace)}:executions:${job}`;
}
