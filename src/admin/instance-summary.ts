import type { InstanceState } from '../shared/registry/instance-info';
import type { LiveInstanceEntry } from './job-status';

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
 * Aggregates the instance nodes of every job into one entry per instance, sorted by instance id.
 * A worker writes the same data under each of its jobs; while it switches state (or re-registers)
 * the nodes may briefly differ: the newest registration (`startedAt`) wins, and `draining` wins
 * over `ready` since a worker only drains on its way out.
 */
export function summarizeInstances(jobs: ReadonlyArray<{ name: string; instances: readonly LiveInstanceEntry[] }>): InstanceSummary[] {
  const byId = new Map<string, InstanceSummary & { startedAt: number }>();
  for (const job of jobs) {
    for (const { instanceId, info } of job.instances) {
      const known = byId.get(instanceId);
      if (!known || info.startedAt > known.startedAt) {
        byId.set(instanceId, {
          instanceId,
          ip: info.ip,
          hostname: info.hostname,
          pid: info.pid,
          state: info.state,
          queue: info.queue,
          jobs: [...(known?.jobs ?? []), job.name],
          startedAt: info.startedAt,
        });
      } else {
        known.jobs.push(job.name);
        if (info.state === 'draining' && info.startedAt === known.startedAt) known.state = 'draining';
      }
    }
  }
  return [...byId.values()]
    .sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0))
    .map(({ startedAt: _startedAt, jobs, ...rest }) => ({ ...rest, jobs: [...new Set(jobs)].sort() }));
}
