import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, hasCode } from '../shared/errors';
import { isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import type { ZkClient } from '../shared/zk';
import { notFound } from './admin-errors';

/** Jobs read or written at once: a namespace may hold thousands. */
const JOBS_AT_ONCE = 32;

/** What a server switch did. */
export interface ServerSwitchResult {
  readonly ip: string;
  /** Every job that has this server (`servers/{ip}`), sorted. */
  readonly jobs: readonly string[];
  /** The jobs whose value this call changed (the others already said so), sorted. */
  readonly changed: readonly string[];
}

/**
 * Writes `DISABLED` or `ENABLED` to `/{job}/servers/{ip}` of every job that has that server: the
 * exact IP, as ElasticJob matches it. The leader gives no new items to the instances of a disabled
 * server from the next fire on (their running items finish). Jobs that do not know the server are
 * left alone: a server is never added by this. Throws INVALID_CONFIG (`ip` cannot be a node name),
 * NOT_FOUND when no job has the server.
 */
export async function setServerDisabled(zk: ZkClient, ip: string, disabled: boolean): Promise<ServerSwitchResult> {
  // Validates `ip` as one node name (no '/', not empty) before any read.
  registryPaths.jobServer('job', ip);
  const value = disabled ? 'DISABLED' : 'ENABLED';
  const jobs: string[] = [];
  const changed: string[] = [];
  const names = (await zk.children('/')).filter(isValidJobName);
  await forEachLimited(names, JOBS_AT_ONCE, async (job) => {
    const path = registryPaths.jobServer(job, ip);
    let current: string;
    try {
      current = (await zk.get(path)).data.toString('utf8').trim();
    } catch (err) {
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) return;
      throw err;
    }
    jobs.push(job);
    if (current === value) return;
    try {
      // No version: the value is the whole state, and a plain set only fails when the node went
      // away (the job was removed meanwhile, or someone removed the server), which leaves it out.
      await zk.set(path, value);
      changed.push(job);
    } catch (err) {
      if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
      jobs.splice(jobs.indexOf(job), 1);
    }
  });
  if (jobs.length === 0) {
    throw notFound(`No job has the server ${JSON.stringify(ip)} (servers are matched by their exact IP, as workers register them; \`shardcron instances\` lists them)`, { ip });
  }
  return { ip, jobs: jobs.sort(), changed: changed.sort() };
}
