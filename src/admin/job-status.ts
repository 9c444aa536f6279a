/**
 * What the console and the CLI show about a job, computed from what the registry holds: pure
 * functions over {@link JobSnapshot}s, no I/O, so every rule is unit-tested without servers. The
 * shapes are the console contract's (DESIGN.md "Console contract"): keep the field names.
 */
import type { JobConfig, JobType } from '../shared/config/job-config';
import { parseCron, type CronSchedule } from '../shared/cron/cron';
import type { FireLedger } from '../shared/registry/fire-ledger';
import type { InstanceInfo } from '../shared/registry/instance-info';
import { parseShardingItemParameters } from '../shared/sharding/sharding-item-parameters';

/** A job's status, as ElasticJob's console names them. */
export const JobStatuses = ['OK', 'DISABLED', 'SHARDING_FLAG', 'CRASHED'] as const;
export type JobStatus = (typeof JobStatuses)[number];

/** A sharding item's status, as ElasticJob's console names them. */
export const ItemStatuses = ['RUNNING', 'PENDING', 'DISABLED', 'SHARDING_FLAG'] as const;
export type ItemStatus = (typeof ItemStatuses)[number];

/** One live instance of a job: its `instances/{instanceId}` node. */
export interface LiveInstanceEntry {
  readonly instanceId: string;
  readonly info: InstanceInfo;
}

/** Everything the job-level answers are computed from: the nodes of `/{job}` other than its items. */
export interface JobSnapshot {
  readonly name: string;
  /** The stored config (the last valid one read). */
  readonly config: JobConfig;
  /** Live instances with readable data, any state. */
  readonly instances: readonly LiveInstanceEntry[];
  /** ip -> `servers/{ip}` value; a value other than `DISABLED` counts as enabled, as the leader reads it. */
  readonly servers: ReadonlyMap<string, string>;
  /** `leader/sharding/necessary` exists. */
  readonly shardingFlagged: boolean;
  /** `leader/fire`, when present and valid. */
  readonly ledger: FireLedger | undefined;
}

/** What the nodes under `sharding/{i}` say (a node absent: undefined / false). */
export interface ItemSnapshot {
  readonly item: number;
  /**
   * The item is being run: its `running` node exists and, with item leases, its record in Redis
   * shows a run (a lease held between runs is not a run; ReadModel tells them apart).
   */
  readonly running: boolean;
  /** The holder instance id from the `running` node's data (undefined when empty or absent). */
  readonly runningHolder: string | undefined;
  readonly disabled: boolean;
  /** The `failover` node exists (its data: the instance running the failed-over item). */
  readonly failover: boolean;
  /** The `instance` node's data: the instance the leader last assigned the item to. */
  readonly assignedInstance: string | undefined;
}

/** `GET /api/jobs` entry. Times are epoch ms. */
export interface JobSummary {
  name: string;
  type: JobType;
  cron: string | null;
  timeZone: string;
  shardingTotalCount: number;
  status: JobStatus;
  /** Number of live instances (any state). */
  instances: number;
  nextFireTime: number | null;
  lastFireTime: number | null;
}

/** One item of a {@link JobDetail}. */
export interface ItemDetail {
  item: number;
  /** From shardingItemParameters; `''` when the item has none (as `ctx.shardingParameter`). */
  parameter: string;
  status: ItemStatus;
  /** The instance running the item, else the one assigned to it; null when unassigned. */
  instanceId: string | null;
  /** A failed-over run of the item is in progress (`sharding/{i}/failover` exists). */
  failover: boolean;
}

/** `GET /api/jobs/:name`. Times are epoch ms. */
export interface JobDetail {
  name: string;
  status: JobStatus;
  config: JobConfig;
  items: ItemDetail[];
  nextFireTime: number | null;
  lastFireTime: number | null;
}

/**
 * The job's status, first rule that applies: DISABLED when its config says so; CRASHED when no
 * live instance can run it (none `ready` on a server not DISABLED); SHARDING_FLAG when it is flagged
 * for resharding or its last ledger gives items to instances no longer live (the next fire reshards);
 * else OK.
 */
export function jobStatus(job: JobSnapshot): JobStatus {
  if (job.config.disabled) return 'DISABLED';
  const eligible = job.instances.some(({ info }) => info.state === 'ready' && job.servers.get(info.ip) !== 'DISABLED');
  if (!eligible) return 'CRASHED';
  if (job.shardingFlagged || ledgerNamesGoneInstances(job)) return 'SHARDING_FLAG';
  return 'OK';
}

function ledgerNamesGoneInstances(job: JobSnapshot): boolean {
  if (!job.ledger) return false;
  const live = new Set(job.instances.map((i) => i.instanceId));
  return Object.entries(job.ledger.assignment).some(([instanceId, items]) => items.length > 0 && !live.has(instanceId));
}

/** How many parsed schedules {@link nextFireTime} keeps: jobs share a few distinct expressions. */
const SCHEDULES_KEPT = 1024;
const schedules = new Map<string, CronSchedule>();

function scheduleOf(cron: string, timeZone: string): CronSchedule {
  const key = `${timeZone}\n${cron}`;
  let schedule = schedules.get(key);
  if (!schedule) {
    schedule = parseCron(cron, timeZone);
    if (schedules.size >= SCHEDULES_KEPT) schedules.delete(schedules.keys().next().value as string);
    schedules.set(key, schedule);
  }
  return schedule;
}

/**
 * The job's next cron fire strictly after `now` (epoch ms), in its time zone; null for a
 * trigger-only or disabled job, or an expression that never fires again.
 */
export function nextFireTime(config: JobConfig, now: number): number | null {
  if (config.disabled || config.cron === undefined) return null;
  // The next fire after `now` is the one last computed for this config from an earlier time, as long
  // as that fire is still ahead: `GET /api/jobs` evaluates 1,000 crons per request otherwise (about a
  // third of its time in the console bench). Configs are replaced, never changed, when they change.
  const known = nextFires.get(config);
  if (known && known.from <= now && (known.next === null || now < known.next)) return known.next;
  const next = scheduleOf(config.cron, config.timeZone).next(now);
  nextFires.set(config, { from: now, next });
  return next;
}

/** The last next fire computed per config (see {@link nextFireTime}). */
const nextFires = new WeakMap<JobConfig, { from: number; next: number | null }>();

/** The `GET /api/jobs` entry of a job. */
export function summarizeJob(job: JobSnapshot, now: number): JobSummary {
  const { config } = job;
  return {
    name: job.name,
    type: config.type,
    cron: config.cron ?? null,
    timeZone: config.timeZone,
    shardingTotalCount: config.shardingTotalCount,
    status: jobStatus(job),
    instances: job.instances.length,
    nextFireTime: nextFireTime(config, now),
    lastFireTime: job.ledger?.fireTime ?? null,
  };
}

/** item -> instance, from the ledger's assignment (instance -> items). */
function ledgerOwners(ledger: FireLedger | undefined): Map<number, string> {
  const owners = new Map<number, string>();
  for (const [instanceId, items] of Object.entries(ledger?.assignment ?? {})) for (const item of items) owners.set(item, instanceId);
  return owners;
}

/**
 * One item's status, first rule that applies: RUNNING when its `running` node exists (an item
 * disabled while it runs still shows RUNNING until it ends); DISABLED; SHARDING_FLAG when the job
 * is flagged for resharding or the instance it is assigned to is not live; else PENDING (an item
 * never assigned yet is PENDING: the first fire assigns it).
 */
export function itemStatus(item: ItemSnapshot, assigned: string | undefined, job: Pick<JobSnapshot, 'shardingFlagged'>, live: ReadonlySet<string>): ItemStatus {
  if (item.running) return 'RUNNING';
  if (item.disabled) return 'DISABLED';
  if (job.shardingFlagged || (assigned !== undefined && !live.has(assigned))) return 'SHARDING_FLAG';
  return 'PENDING';
}

/**
 * The `GET /api/jobs/:name` answer. `items` holds what was read under `sharding/{i}`; an item
 * below shardingTotalCount missing from it counts as having no nodes. Items at or above the total
 * are left out.
 */
export function describeJob(job: JobSnapshot, items: readonly ItemSnapshot[], now: number): JobDetail {
  const { config } = job;
  const parameters = parseShardingItemParameters(config.shardingItemParameters);
  const byItem = new Map(items.map((i) => [i.item, i]));
  const owners = ledgerOwners(job.ledger);
  const live = new Set(job.instances.map((i) => i.instanceId));
  const details: ItemDetail[] = [];
  for (let item = 0; item < config.shardingTotalCount; item += 1) {
    const snapshot = byItem.get(item) ?? { item, running: false, runningHolder: undefined, disabled: false, failover: false, assignedInstance: undefined };
    const assigned = snapshot.assignedInstance ?? owners.get(item);
    details.push({
      item,
      parameter: parameters[item] ?? '',
      status: itemStatus(snapshot, assigned, job, live),
      instanceId: snapshot.runningHolder ?? assigned ?? null,
      failover: snapshot.failover,
    });
  }
  return {
    name: job.name,
    status: jobStatus(job),
    config,
    items: details,
    nextFireTime: nextFireTime(config, now),
    lastFireTime: job.ledger?.fireTime ?? null,
  };
}
