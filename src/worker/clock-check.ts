import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ResolvedJobDefinition } from '../shared/config/job-definition';
import type { ZkClient } from '../shared/zk';

/**
 * How far this host's clock is from ZooKeeper's, in ms (positive: we are ahead). The server
 * stamps a node's ctime when it creates it; the local reading is taken half-way through the round
 * trip, so the error is at most half of it.
 */
export async function measureClockSkewMs(zk: ZkClient, probePath: string): Promise<number> {
  const before = Date.now();
  await zk.set(probePath, String(before));
  const after = Date.now();
  const stat = await zk.exists(probePath);
  if (!stat) throw new ShardcronError(ErrorCodes.ZK_NO_NODE, `clock probe ${probePath} vanished`);
  return Math.round((before + after) / 2 - stat.mtimeMs);
}

/**
 * ElasticJob's maxTimeDiffSeconds: a job refuses to run on a host whose clock differs from the
 * registry's by more than the limit, since fire times and ledgers would be judged on a wrong clock.
 * Returns the jobs whose limit the measured skew exceeds.
 */
export function jobsRejectingSkew(jobs: readonly ResolvedJobDefinition[], skewMs: number): ResolvedJobDefinition[] {
  return jobs.filter((job) => job.maxTimeDiffSeconds > 0 && Math.abs(skewMs) > job.maxTimeDiffSeconds * 1000);
}

/** Throws when a job's limit is exceeded; the message names the jobs, the skew and the limits. */
export function assertClockSkew(jobs: readonly ResolvedJobDefinition[], skewMs: number): void {
  const rejecting = jobsRejectingSkew(jobs, skewMs);
  if (rejecting.length === 0) return;
  const limits = rejecting.map((j) => `${j.name} (maxTimeDiffSeconds ${j.maxTimeDiffSeconds})`).join(', ');
  throw new ShardcronError(
    ErrorCodes.CLOCK_SKEW,
    `This host's clock is ${(skewMs / 1000).toFixed(1)} s ${skewMs > 0 ? 'ahead of' : 'behind'} ZooKeeper's, more than ${limits} allow. ` +
      'Synchronise the clock (NTP) or raise maxTimeDiffSeconds.',
    { skewMs, jobs: rejecting.map((j) => j.name) },
  );
}
