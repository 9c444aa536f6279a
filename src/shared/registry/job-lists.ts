/**
 * The lists of jobs worker instances run. A worker's instance entry (`/.cluster/instances/{id}`)
 * names its list; the list itself is split into parts, `/.cluster/job-lists/{list}.{k}`, each an
 * ephemeral node of the worker's session holding job names one per line. Parts, because ZooKeeper
 * refuses a node above 1 MB and 100,000 job names take more.
 *
 * A list's name starts with a hash of its sorted names, so that readers holding many instances that
 * run the same jobs (a fleet of one deployment) keep one set of names for all of them; its writer's
 * session follows, so that two writers of the same list never write the same nodes.
 */
import { createHash } from 'node:crypto';
import { ErrorCodes, ShardcronError } from '../errors';
import type { ZkClient } from '../zk';
import { MAX_JOB_LIST_PARTS, type JobListRef } from './instance-info';
import { isValidJobName, registryPaths } from './registry-paths';

/** Bytes of names per part: well under ZooKeeper's 1 MB node limit (jute.maxbuffer). */
export const JOB_LIST_PART_BYTES = 256 * 1024;

/** The hash part of a list's name: equal for lists of the same names. */
export function jobListHash(list: string): string {
  return list.slice(0, 16);
}

/** A list of `names` (sorted, no duplicates) as written by session `sessionId`, split into parts. */
export function buildJobList(names: readonly string[], sessionId: string): { ref: JobListRef; parts: string[] } {
  const sorted = [...new Set(names)].sort();
  const text = sorted.join('\n');
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const session = sessionId.replace(/[^0-9A-Za-z]/g, '').slice(-32) || '0';
  const parts: string[] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const name of sorted) {
    if (bytes + name.length + 1 > JOB_LIST_PART_BYTES && current.length > 0) {
      parts.push(current.join('\n'));
      current = [];
      bytes = 0;
    }
    current.push(name);
    bytes += name.length + 1;
  }
  if (current.length > 0) parts.push(current.join('\n'));
  if (parts.length > MAX_JOB_LIST_PARTS) {
    throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `A worker cannot run ${sorted.length} jobs: their names take more than ${MAX_JOB_LIST_PARTS} list parts`, { jobs: sorted.length });
  }
  return { ref: { list: `${hash}-${session}`, parts: parts.length, count: sorted.length }, parts };
}

/** A list's names as read from its parts. Throws CORRUPT_DATA naming the part, ZK_NO_NODE when a part is gone (the list was replaced). */
export async function readJobList(zk: ZkClient, ref: JobListRef): Promise<string[]> {
  const texts = await Promise.all(Array.from({ length: ref.parts }, (_, part) => zk.get(registryPaths.jobListPart(ref.list, part))));
  const names: string[] = [];
  texts.forEach(({ data }, part) => {
    const text = data.toString('utf8');
    if (text === '') return;
    for (const name of text.split('\n')) {
      if (!isValidJobName(name)) {
        const path = registryPaths.jobListPart(ref.list, part);
        throw new ShardcronError(ErrorCodes.CORRUPT_DATA, `Corrupt job list part at ${path}: ${JSON.stringify(String(name).slice(0, 40))} is not a job name`, { path });
      }
      names.push(name);
    }
  });
  if (names.length !== ref.count) {
    const path = registryPaths.jobListPart(ref.list, 0);
    throw new ShardcronError(ErrorCodes.CORRUPT_DATA, `Corrupt job list ${ref.list}: its ${ref.parts} parts hold ${names.length} names, its instance entry says ${ref.count}`, { path });
  }
  return names;
}

/** Writes a list's parts (ephemeral, of the client's session); parts already there are this list's. */
export async function writeJobList(zk: ZkClient, ref: JobListRef, parts: readonly string[]): Promise<void> {
  await Promise.all(parts.map((text, part) => zk.createUnlessExists(registryPaths.jobListPart(ref.list, part), text, 'ephemeral')));
}

/** Deletes a list's parts; best effort (they go with the session anyway). */
export async function deleteJobList(zk: ZkClient, ref: JobListRef): Promise<void> {
  await Promise.allSettled(Array.from({ length: ref.parts }, (_, part) => zk.delete(registryPaths.jobListPart(ref.list, part))));
}
