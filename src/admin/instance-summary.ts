import type { InstanceInfo, InstanceState } from '../shared/registry/instance-info';

/** `GET /api/instances` entry: one live worker instance and the jobs it is registered for. */
export interface InstanceSummary {
  instanceId: string;
  ip: string;
  hostname: string;
  pid: number;
  state: InstanceState;
  queue: string;
  /** Job names, sorted. */
  jobs: string[];
}

/**
 * One entry per live instance of the directory, sorted by instance id, each with the jobs of its
 * list that `known` accepts (the jobs the read model follows), sorted.
 */
export function summarizeInstances(
  instances: ReadonlyArray<{ instanceId: string; info: InstanceInfo; jobs: Iterable<string> }>,
  known: (job: string) => boolean = () => true,
): InstanceSummary[] {
  return [...instances]
    .sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0))
    .map(({ instanceId, info, jobs }) => ({
      instanceId,
      ip: info.ip,
      hostname: info.hostname,
      pid: info.pid,
      state: info.state,
      queue: info.queue,
      jobs: [...jobs].filter(known).sort(),
    }));
}
