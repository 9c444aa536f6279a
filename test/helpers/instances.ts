/** Worker instance entries written by hand, as a worker of the instance directory layout writes them. */
import { instanceEntryCodec, type InstanceInfo } from '../../src/shared/registry/instance-info';
import { buildJobList, writeJobList } from '../../src/shared/registry/job-lists';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import type { ZkClient, ZkCreateMode } from '../../src/shared/zk';

/** The entry data of an instance running `jobs`, with its list written (ephemeral parts of `zk`'s session). */
export async function instanceEntry(zk: ZkClient, info: InstanceInfo, jobs: readonly string[]): Promise<Buffer> {
  const { ref, parts } = buildJobList(jobs, zk.sessionId);
  await writeJobList(zk, ref, parts);
  return instanceEntryCodec.encode({ ...info, jobs: ref });
}

/** Creates `/.cluster/instances/{instanceId}` for an instance running `jobs`. */
export async function putInstance(zk: ZkClient, instanceId: string, info: InstanceInfo, jobs: readonly string[], mode: ZkCreateMode = 'persistent'): Promise<void> {
  const data = await instanceEntry(zk, info, jobs);
  await zk.ensurePath(registryPaths.instances());
  await zk.create(registryPaths.instance(instanceId), data, mode);
}

/** Rewrites an instance's entry (its info, its jobs). */
export async function setInstance(zk: ZkClient, instanceId: string, info: InstanceInfo, jobs: readonly string[]): Promise<void> {
  await zk.set(registryPaths.instance(instanceId), await instanceEntry(zk, info, jobs));
}
