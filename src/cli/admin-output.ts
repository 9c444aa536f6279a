/**
 * How `shardcron jobs list|show` and `shardcron instances` print what the admin layer answers, as
 * tables (the default) or as the console API's JSON (`--json`). Pure: lines in, lines out.
 */
import type { DataProblem, InstanceSummary, JobDetail, JobSummary } from '../admin';
import { JOB_CONFIG_FIELDS } from '../shared/config/job-config';
import { formatTable, formatTime, NONE } from './text-table';

/** `jobs list`: one row per job. */
export function jobListLines(jobs: readonly JobSummary[], namespace: string): string[] {
  if (jobs.length === 0) return [`No jobs in namespace ${namespace}.`];
  return formatTable([
    ['NAME', 'STATUS', 'TYPE', 'CRON', 'TIME ZONE', 'ITEMS', 'INSTANCES', 'NEXT FIRE', 'LAST FIRE'],
    ...jobs.map((job) => [
      job.name,
      job.status,
      job.type,
      job.cron ?? '(trigger only)',
      job.timeZone,
      job.shardingTotalCount,
      job.instances,
      formatTime(job.nextFireTime),
      formatTime(job.lastFireTime),
    ]),
  ]);
}

const configValue = (value: unknown): string => (value === undefined ? NONE : typeof value === 'string' ? (value === '' ? '""' : value) : JSON.stringify(value));

/**
 * `jobs show`: the job's status and times, every stored config field under its stored name (the
 * names `updateConfig` and the console take), a blank line, then one row per item.
 */
export function jobDetailLines(job: JobDetail): string[] {
  const config = job.config as unknown as Record<string, unknown>;
  const head = formatTable([
    ['name', job.name],
    ['status', job.status],
    ['next fire', formatTime(job.nextFireTime)],
    ['last fire', formatTime(job.lastFireTime)],
    ...JOB_CONFIG_FIELDS.filter((field) => field !== 'name').map((field) => [field, configValue(config[field])]),
  ]);
  const items = formatTable([
    ['ITEM', 'PARAMETER', 'STATUS', 'INSTANCE', 'FAILOVER'],
    ...job.items.map((item) => [item.item, item.parameter, item.status, item.instanceId ?? NONE, item.failover ? 'yes' : NONE]),
  ]);
  return [...head, '', ...items];
}

/** `instances`: one row per live instance. */
export function instanceLines(instances: readonly InstanceSummary[], namespace: string): string[] {
  if (instances.length === 0) return [`No live instances in namespace ${namespace}.`];
  return formatTable([
    ['INSTANCE', 'IP', 'HOSTNAME', 'PID', 'STATE', 'JOBS', 'QUEUE'],
    ...instances.map((i) => [i.instanceId, i.ip, i.hostname, i.pid, i.state, i.jobs.join(','), i.queue]),
  ]);
}

/** Unreadable nodes, for stderr: the data is shown without them, and the operator should know. */
export function problemLines(problems: readonly DataProblem[]): string[] {
  return problems.map((p) => `warning: ${p.message.includes(p.path) ? p.message : `${p.path}: ${p.message}`}`);
}

/** Pretty JSON, the shape the console API answers. */
export function jsonLines(value: unknown): string[] {
  return [JSON.stringify(value, null, 2)];
}
