/**
 * Disabling and enabling a job and one of its items (DESIGN.md flow 10). Each is idempotent and
 * says whether it changed anything; the leader picks the change up through its watches and applies
 * it at the job's next fire.
 */
import { toJobConfig } from '../shared/config/job-config';
import { ErrorCodes, hasCode } from '../shared/errors';
import { registryPaths } from '../shared/registry/registry-paths';
import type { NodeStamp, ZkClient } from '../shared/zk';
import { jobNotFound, notFound, parseItemNumber } from './admin-errors';
import { readJobConfig, rewriteJobConfig } from './config-store';

/** What a switch did: `changed` is false when the job or item already was in that state. */
export interface SwitchResult {
  readonly changed: boolean;
}

/** A switch with the config write it saw or made: what a read model must have read to show the switch. */
export interface StampedSwitch extends SwitchResult {
  readonly configStamp: NodeStamp;
}

/**
 * Sets the config's `disabled` (versioned read-modify-write, retried on a conflict). A disabled job
 * does not fire and refuses manual triggers; items running now finish. Throws JOB_NOT_FOUND,
 * CORRUPT_DATA, CONFLICT.
 */
export async function setJobDisabled(zk: ZkClient, job: string, disabled: boolean): Promise<StampedSwitch> {
  const { changed, stamp } = await rewriteJobConfig(zk, job, (config) => (config.disabled === disabled ? undefined : toJobConfig({ ...config, disabled })));
  return { changed, configStamp: stamp };
}

/**
 * Creates (disable) or deletes (enable) `sharding/{item}/disabled`. The leader leaves a disabled
 * item out of every fire; a run in progress finishes. `item` must be below the job's
 * shardingTotalCount. Throws INVALID_CONFIG (not an item number), JOB_NOT_FOUND, NOT_FOUND (an item
 * outside 0..total-1), CORRUPT_DATA.
 */
export async function setItemDisabled(zk: ZkClient, job: string, itemValue: unknown, disabled: boolean): Promise<StampedSwitch & { item: number }> {
  const item = parseItemNumber(itemValue);
  const { config, ...configStamp } = await readJobConfig(zk, job);
  if (item >= config.shardingTotalCount) {
    throw notFound(`Job ${JSON.stringify(job)} has no item ${item}: its items are 0 to ${config.shardingTotalCount - 1}`, { job, item, shardingTotalCount: config.shardingTotalCount });
  }
  const path = registryPaths.shardingDisabled(job, item);
  if (!disabled) {
    try {
      await zk.delete(path);
      return { changed: true, configStamp, item };
    } catch (err) {
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) return { changed: false, configStamp, item };
      throw err;
    }
  }
  // A job that never fired has no item nodes yet. Plain creates, not a mkdirp: a job removed
  // meanwhile is not brought back (its node is gone, so the first create fails).
  for (const parent of [registryPaths.jobSharding(job), registryPaths.shardingItem(job, item)]) await createIfAbsent(zk, job, parent);
  return { changed: await createIfAbsent(zk, job, path), configStamp, item };
}

/** Creates an empty persistent node; false when it existed. Throws JOB_NOT_FOUND when its parent is gone. */
async function createIfAbsent(zk: ZkClient, job: string, path: string): Promise<boolean> {
  try {
    await zk.create(path);
    return true;
  } catch (err) {
    if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) return false;
    if (hasCode(err, ErrorCodes.ZK_NO_NODE)) throw jobNotFound(job, 'it was removed meanwhile');
    throw err;
  }
}
