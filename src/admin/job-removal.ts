/**
 * Removing a job (DESIGN.md flow 10): its whole ZooKeeper subtree, then every request of it left in
 * the namespace's queues in Redis.
 */
import { deleteItemRecords } from '../shared/registry/item-records';
import { recentExecutionsKey } from '../shared/registry/redis-keys';
import type { RedisClient } from '../shared/redis/redis-connection';
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, hasCode } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { assertJobName, registryPaths } from '../shared/registry/registry-paths';
import { sleep, type ZkClient } from '../shared/zk';
import { conflict, jobNotFound } from './admin-errors';
import { setJobDisabled } from './job-switches';
import { removeJobRequests, type QueuedRequestRef, type RequestRemoval } from './queued-requests';

/** Deletes per multi: well below ZooKeeper's 1 MB request limit with 128-character paths. */
const DELETES_PER_MULTI = 400;
/** Children reads in flight while walking a subtree. */
const READS_AT_ONCE = 64;
/** Walks of a subtree before giving up on nodes that keep appearing. */
const MAX_PASSES = 10;

/** Every node of the subtree at `root`, parents before children; empty when `root` is absent. */
async function listTree(zk: ZkClient, root: string): Promise<string[]> {
  const nodes: string[] = [];
  let level = [root];
  while (level.length > 0) {
    const next: string[] = [];
    await forEachLimited(level, READS_AT_ONCE, async (path) => {
      try {
        const kids = await zk.children(path);
        nodes.push(path);
        for (const kid of kids) next.push(`${path}/${kid}`);
      } catch (err) {
        // Gone meanwhile (an ephemeral node whose session ended): nothing to delete there.
        if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
      }
    });
    level = next;
  }
  return nodes;
}

/**
 * Deletes `root` and everything under it, children first, in multis of {@link DELETES_PER_MULTI}.
 * Nodes may appear meanwhile (a worker's `running` lock, a leader's write) or vanish (an ephemeral
 * node whose session ended): a multi that meets either fails whole, and the subtree is walked again,
 * up to {@link MAX_PASSES} times, then CONFLICT. Returns how many nodes it deleted.
 */
export async function deleteTree(zk: ZkClient, root: string): Promise<number> {
  let deleted = 0;
  for (let pass = 1; pass <= MAX_PASSES; pass += 1) {
    const nodes = await listTree(zk, root);
    if (nodes.length === 0) return deleted;
    // Deepest first: every child is deleted before its parent, within a multi and across them.
    const ordered = nodes.sort((a, b) => b.split('/').length - a.split('/').length);
    try {
      for (let i = 0; i < ordered.length; i += DELETES_PER_MULTI) {
        const tx = zk.multi();
        const chunk = ordered.slice(i, i + DELETES_PER_MULTI);
        for (const path of chunk) tx.delete(path);
        await tx.commit();
        deleted += chunk.length;
      }
      return deleted;
    } catch (err) {
      if (!hasCode(err, ErrorCodes.ZK_NO_NODE) && !hasCode(err, ErrorCodes.ZK_NOT_EMPTY)) throw err;
    }
  }
  throw conflict(`Nodes kept appearing under ${root} while it was being deleted; stop what writes there (workers of the job) and try again`, { path: root });
}

/** Options of {@link removeJob}. */
export interface RemoveJobOptions {
  /** How long to wait for requests a worker holds (runs now) to end so they can be removed too. Default 5000. */
  lockedWaitMs?: number;
  /**
   * Pause before a last pass over the queues, for requests of a fire the leader was enqueuing
   * while the job was removed (it writes its ledger up to 300 ms before it enqueues). Default 1000.
   */
  settleMs?: number;
}

/** What {@link removeJob} did. */
export interface RemoveJobResult {
  job: string;
  /** ZooKeeper nodes deleted (the job's node and everything under it). */
  zookeeperNodes: number;
  /** Requests of the job removed from the namespace's queues. */
  removedRequests: number;
  /** Requests still run by a worker when the wait ended: not removed. Empty when everything went. */
  lockedRequests: QueuedRequestRef[];
}

type RemovalDeps = { zk: ZkClient; redis: RedisClient; queuePrefix: string; namespace: string; log: Logger };

/**
 * Passes over the queues until one finds nothing a worker holds, a pass at least `settleMs` after
 * the previous one finding nothing too, or `lockedWaitMs` ran out. The first pass's counts come
 * back in `first`, for the not-found check.
 */
async function removeRequestsUntilSettled({ redis, queuePrefix, namespace, log }: RemovalDeps, job: string, options: RemoveJobOptions, first: (pass: RequestRemoval) => void): Promise<RequestRemoval> {
  let removed = 0;
  const lockedUntil = Date.now() + (options.lockedWaitMs ?? 5_000);
  let settled = false;
  for (let passes = 1; ; passes += 1) {
    const pass = await removeJobRequests(redis, queuePrefix, namespace, job, log);
    removed += pass.removed;
    if (passes === 1) first(pass);
    if (pass.locked.length === 0 && settled) return { removed, locked: [] };
    if (pass.locked.length > 0 && Date.now() >= lockedUntil) return { removed, locked: pass.locked };
    await sleep(pass.locked.length > 0 ? 200 : (options.settleMs ?? 1_000));
    settled = pass.locked.length === 0;
  }
}

/**
 * Removes job `job`: disables it first (so the leader stops firing it while the rest goes), deletes
 * its ZooKeeper subtree, removes its requests from every queue of the namespace, waiting up to
 * `lockedWaitMs` for those a worker holds, then deletes whatever of the subtree came back meanwhile:
 * a run already under way when the job was removed re-creates its item's nodes when it takes the
 * item's lock. Running it again finishes a removal that stopped half-way. Throws INVALID_CONFIG for
 * a name that cannot be a job, JOB_NOT_FOUND when neither ZooKeeper nor Redis holds anything of it,
 * CONFLICT.
 */
export async function removeJob(deps: RemovalDeps, job: string, options: RemoveJobOptions = {}): Promise<RemoveJobResult> {
  assertJobName(job, 'job');
  const { zk, log } = deps;
  await setJobDisabled(zk, job, true).catch((err: unknown) => {
    // An absent or unreadable config does not stop a removal: that is what is being removed.
    if (!hasCode(err, ErrorCodes.JOB_NOT_FOUND) && !hasCode(err, ErrorCodes.CORRUPT_DATA)) throw err;
  });
  const root = registryPaths.job(job);
  const deletedFirst = await deleteTree(zk, root);
  const requests = await removeRequestsUntilSettled(deps, job, options, (pass) => {
    if (deletedFirst === 0 && pass.removed === 0 && pass.locked.length === 0) throw jobNotFound(job);
  });
  const zookeeperNodes = deletedFirst + (await deleteTree(zk, root));
  // The item records of item leases: a job added again under the name starts with none.
  await deleteItemRecords(deps.redis, deps.namespace, job).catch((err: unknown) => log.warn({ err, job }, 'could not delete the item records of the removed job'));
  // Its recent executions too: a job added again under the name showed the old one's (PostgreSQL's
  // traces, when configured, keep the history).
  await deps.redis.del(recentExecutionsKey(deps.namespace, job)).catch((err: unknown) => log.warn({ err, job }, 'could not delete the recent executions of the removed job'));
  if (requests.locked.length > 0) log.warn({ job, locked: requests.locked }, 'requests still run by workers were not removed');
  log.info({ job, zookeeperNodes, removedRequests: requests.removed }, 'job removed');
  return { job, zookeeperNodes, removedRequests: requests.removed, lockedRequests: requests.locked };
}
