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

/** The Redis keys of one fire's once-per-fire listener state (src/worker/fire-listeners.ts). */
export interface FireStateKeys {
  /** Hash: `items` (the fire's item count), `before` (the instance that claimed beforeFire, then `done`), `after` (the instance that claimed afterFire). */
  readonly state: string;
  /** Set of the items that ended or were given up; deleted once afterFire is claimed. */
  readonly ended: string;
  /** The beforeFire claimer's lease: it lives while its listener runs (renewed), and dies with its process. */
  readonly lease: string;
}

/**
 * The keys of fire `fireTime` of `job`, e.g. `shardcron:{prod}:fire:billing:1700000000000` (`fire-ended:`
 * and `fire-lease:` likewise). All in the namespace's hash slot, so one Lua script may touch them on a
 * Cluster. Throws a ConfigError naming `job` for an invalid job name.
 */
export function fireStateKeys(namespace: string, job: string, fireTime: number): FireStateKeys {
  assertJobName(job, 'job');
  const prefix = namespaceKeyPrefix(namespace);
  const id = `${job}:${fireTime}`;
  return { state: `${prefix}:fire:${id}`, ended: `${prefix}:fire-ended:${id}`, lease: `${prefix}:fire-lease:${id}` };
}
