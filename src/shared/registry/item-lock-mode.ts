/**
 * Which lock monitorExecution uses in a namespace, recorded once for all its workers in
 * `/.cluster/item-lock`: `lease` (the `running` node kept across fires, each run recorded in Redis)
 * or `per-run` (the node created and deleted per run). The two must never be mixed in a namespace:
 * a per-run worker takes a held lease for a run and leaves its misfire marks where a lease holder
 * does not look (docs/design-notes.md, "Item leases" and "The namespace's item lock").
 */
import { ConfigError, ErrorCodes, hasCode, ShardcronError } from '../errors';
import { forEachLimited } from '../concurrency';
import type { Logger } from '../logger';
import type { ZkClient } from '../zk';
import { isValidJobName, registryPaths } from './registry-paths';

export const ITEM_LOCK_MODES = ['lease', 'per-run'] as const;
export type ItemLockMode = (typeof ITEM_LOCK_MODES)[number];

/** The mode of a namespace that records none and has no live worker: leases. */
export const DEFAULT_ITEM_LOCK_MODE: ItemLockMode = 'lease';

/** Instance listings at once while looking for a live worker. */
const LISTINGS_AT_ONCE = 64;

/** Whether `value` names a lock (`lease` or `per-run`). */
export function isItemLockMode(value: string): value is ItemLockMode {
  return (ITEM_LOCK_MODES as readonly string[]).includes(value);
}

/** The mode SHARDCRON_ITEM_LEASE asks for: `on` a lease, `off` the per-run lock, unset whatever the namespace uses. */
export function itemLockModeOf(itemLease: boolean | undefined): ItemLockMode | undefined {
  return itemLease === undefined ? undefined : itemLease ? 'lease' : 'per-run';
}

/** The namespace's recorded mode, or undefined when it records none. Bad data is an error naming the node. */
export async function readItemLockMode(zk: ZkClient): Promise<ItemLockMode | undefined> {
  const text = await zk.getText(registryPaths.itemLock());
  if (text === undefined) return undefined;
  if (isItemLockMode(text)) return text;
  throw new ShardcronError(
    ErrorCodes.CORRUPT_DATA,
    `${zk.options.namespace}${registryPaths.itemLock()} holds ${JSON.stringify(text.slice(0, 40))}, expected one of ${ITEM_LOCK_MODES.join(', ')} (set it with \`shardcron item-lock lease|per-run\`)`,
    { path: registryPaths.itemLock() },
  );
}

/**
 * A job that has a live instance, or undefined when none has (listing stops once one is found). A
 * worker of this version records the namespace's mode before it registers, so a live instance in a
 * namespace that records none is a worker of an earlier version, which uses the per-run lock.
 */
export async function jobWithLiveInstance(zk: ZkClient): Promise<string | undefined> {
  const jobs = (await zk.children('/')).filter(isValidJobName);
  let found: string | undefined;
  await forEachLimited(jobs, LISTINGS_AT_ONCE, async (job) => {
    if (found !== undefined) return;
    const instances = await zk.children(registryPaths.jobInstances(job)).catch((err: unknown) => {
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) return [];
      throw err;
    });
    if (instances.length > 0) found ??= job;
  });
  return found;
}

/**
 * The lock this worker must use: the namespace's recorded mode. A namespace that records none gets
 * one now: `wanted` if given, otherwise `per-run` when a worker of an earlier version is alive in it
 * (mixing would lose misfire marks), otherwise {@link DEFAULT_ITEM_LOCK_MODE}. A `wanted` mode that
 * differs from the recorded one is an error naming SHARDCRON_ITEM_LEASE: the worker does not start.
 */
export async function settleItemLockMode(zk: ZkClient, wanted: ItemLockMode | undefined, log: Logger): Promise<ItemLockMode> {
  for (;;) {
    const recorded = await readItemLockMode(zk);
    if (recorded !== undefined) {
      if (wanted !== undefined && wanted !== recorded) throw conflict(zk.options.namespace, wanted, recorded);
      return recorded;
    }
    const older = wanted === undefined ? await jobWithLiveInstance(zk) : undefined;
    const mode = wanted ?? (older !== undefined ? 'per-run' : DEFAULT_ITEM_LOCK_MODE);
    try {
      await createRecord(zk, mode);
      if (older !== undefined) log.warn({ job: older, mode }, 'a worker of an earlier version runs in this namespace: recorded the per-run item lock it uses');
      else log.info({ mode }, 'recorded the namespace item lock');
      return mode;
    } catch (err) {
      // Another worker recorded one meanwhile: follow it (or refuse, as above).
      if (!hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) throw err;
    }
  }
}

function conflict(namespace: string, wanted: ItemLockMode, recorded: ItemLockMode): ConfigError {
  const value = wanted === 'lease' ? 'on' : 'off';
  return new ConfigError(ErrorCodes.INVALID_CONFIG, 'This worker cannot use the item lock it was given', [
    {
      field: 'SHARDCRON_ITEM_LEASE',
      message:
        `"${value}" asks for the ${wanted} lock, but namespace ${namespace} uses the ${recorded} lock, and every worker of a namespace must use the same one. ` +
        'Unset SHARDCRON_ITEM_LEASE to follow the namespace, or switch it with `shardcron item-lock ' + wanted + '` while none of its workers runs.',
    },
  ]);
}

/** What {@link setItemLockMode} did. */
export interface ItemLockSwitch {
  previous: ItemLockMode | undefined;
  mode: ItemLockMode;
}

/**
 * Records `mode` for the namespace. Refused (SHARDCRON_CONFLICT) while any worker instance is
 * live, unless `force`: its workers chose their lock when they started and would keep it.
 */
export async function setItemLockMode(zk: ZkClient, mode: ItemLockMode, force = false): Promise<ItemLockSwitch> {
  const previous = await readItemLockMode(zk).catch((err: unknown) => {
    if (hasCode(err, ErrorCodes.CORRUPT_DATA)) return undefined;
    throw err;
  });
  if (previous === mode) return { previous, mode };
  if (!force) {
    // A worker of this version (its entry), or of an earlier one (an instance node under a job).
    const instance = (await zk.children(registryPaths.instances()).catch((err: unknown) => {
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) return [];
      throw err;
    }))[0];
    const job = instance === undefined ? await jobWithLiveInstance(zk) : undefined;
    if (instance !== undefined || job !== undefined) {
      const which = instance !== undefined ? `instance ${instance} is registered` : `job ${job} has an instance of an earlier version`;
      throw new ShardcronError(
        ErrorCodes.CONFLICT,
        `namespace ${zk.options.namespace} has live workers (${which}): stop every worker first, since each keeps the lock it started with (--force switches anyway)`,
        instance !== undefined ? { instanceId: instance } : { job },
      );
    }
  }
  try {
    await zk.set(registryPaths.itemLock(), mode);
  } catch (err) {
    if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
    await createRecord(zk, mode);
  }
  return { previous, mode };
}

/** Creates the record, and `/.cluster` first when no scheduler has made it yet. */
async function createRecord(zk: ZkClient, mode: ItemLockMode): Promise<void> {
  try {
    await zk.create(registryPaths.itemLock(), mode);
  } catch (err) {
    if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
    await zk.ensurePath(registryPaths.clusterRoot());
    await zk.create(registryPaths.itemLock(), mode);
  }
}
