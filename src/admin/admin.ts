import type { RedisClient } from '../shared/redis/redis-connection';
import { readItemRuns } from '../shared/registry/item-records';
import { readItemLockMode, setItemLockMode, type ItemLockMode, type ItemLockSwitch } from '../shared/registry/item-lock-mode';
import { QUEUE_PREFIX } from '../shared/registry/queue-names';
import type { JobConfig } from '../shared/config/job-config';
import { silentLogger, type Logger } from '../shared/logger';
import type { ZkClient } from '../shared/zk';
import { updateJobConfig } from './config-update';
import type { DataProblem } from './data-problems';
import type { InstanceSummary } from './instance-summary';
import { removeJob, type RemoveJobOptions, type RemoveJobResult } from './job-removal';
import type { JobDetail, JobSummary } from './job-status';
import { createDataJob } from './job-creation';
import { setItemDisabled, setJobDisabled, type SwitchResult } from './job-switches';
import { writeTriggerRequest } from './job-trigger';
import { ReadModel, type ReadModelOptions } from './read-model';
import { setServerDisabled, type ServerSwitchResult } from './server-switches';

/** What an {@link Admin} works with: connections it does not own unless `ownsConnections`. */
export interface AdminOptions {
  /** A started client, chrooted to the namespace. */
  zk: ZkClient;
  /** Redis of the namespace's queues (used by {@link Admin.removeJob} only; a lazy connection is fine). */
  redis: RedisClient;
  /** BullMQ prefix of the namespace's queues (`queuePrefix(namespace, target)`); default `shardcron`. */
  queuePrefix?: string;
  namespace: string;
  logger?: Logger;
  /** Options of the read model behind the read methods (which jobs to watch, item idle time, clock). */
  readModel?: Omit<ReadModelOptions, 'zk' | 'logger'>;
  /** close() also closes `zk` and `redis` (set by openAdmin, which opened them). Default false. */
  ownsConnections?: boolean;
}

/**
 * The operations on a namespace that the CLI and the console share (ElasticJob's lifecycle API):
 * it depends on no role, so it works from any node or from a bare ZooKeeper and Redis connection.
 * Writes go straight to the registry; reads come from a watch-backed {@link ReadModel} started on
 * the first read. Errors are ShardcronErrors with stable codes: INVALID_CONFIG (bad input, every
 * field named), JOB_NOT_FOUND, NOT_FOUND (item, server), JOB_DISABLED, CORRUPT_DATA, CONFLICT, and
 * the ZooKeeper codes when a server does not answer.
 */
export class Admin {
  readonly namespace: string;
  private readonly zk: ZkClient;
  private readonly redis: RedisClient;
  private readonly log: Logger;
  private model: ReadModel | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: AdminOptions) {
    this.zk = options.zk;
    this.redis = options.redis;
    this.namespace = options.namespace;
    this.log = (options.logger ?? silentLogger).child({ component: 'admin', ns: options.namespace });
  }

  /** Asks the leader to run every enabled item of `job` once now (source TRIGGER). Returns the request's id. */
  async trigger(job: string, options: { requestedBy?: string } = {}): Promise<{ requestId: string }> {
    const { requestId } = await writeTriggerRequest(this.zk, job, options);
    this.log.info({ job, requestId, requestedBy: options.requestedBy }, 'job triggered');
    return { requestId };
  }

  /**
   * Disables `job`: it stops firing from its next fire on; manual triggers are refused. Like the
   * other switches of a job or an item, a config update and a creation, it returns once this
   * Admin's reads show it (ReadModel.configCaughtUp); the switches of a server do not wait.
   */
  disableJob(job: string): Promise<SwitchResult> {
    return this.logged('job disabled', { job }, this.switchJob(job, true));
  }

  /** Enables `job` again. */
  enableJob(job: string): Promise<SwitchResult> {
    return this.logged('job enabled', { job }, this.switchJob(job, false));
  }

  /** Leaves item `item` of `job` out of every fire until it is enabled again. */
  disableItem(job: string, item: number | string): Promise<SwitchResult> {
    return this.logged('item disabled', { job, item }, this.switchItem(job, item, true));
  }

  /** Enables item `item` of `job` again. */
  enableItem(job: string, item: number | string): Promise<SwitchResult> {
    return this.logged('item enabled', { job, item }, this.switchItem(job, item, false));
  }

  /** Disables the server `ip` (exact match) in every job that has it; returns those jobs. */
  disableServer(ip: string): Promise<ServerSwitchResult> {
    return this.logged('server disabled', { ip }, setServerDisabled(this.zk, ip, true));
  }

  /** Enables the server `ip` again in every job that has it. */
  enableServer(ip: string): Promise<ServerSwitchResult> {
    return this.logged('server enabled', { ip }, setServerDisabled(this.zk, ip, false));
  }

  /** Changes some fields of `job`'s stored config (validated like a definition); returns the config now stored. */
  async updateConfig(job: string, update: unknown): Promise<JobConfig> {
    const { config, stamp } = await updateJobConfig(this.zk, job, update);
    await this.model?.configCaughtUp(job, stamp);
    this.log.info({ job, fields: typeof update === 'object' && update !== null ? Object.keys(update) : [] }, 'config updated');
    return config;
  }

  /**
   * Stores a SCRIPT or HTTP job given as data (`POST /api/jobs`, `shardcron jobs create`): validated
   * whole, unknown fields refused; CONFLICT when the name exists. Generic workers run it.
   */
  async createJob(body: unknown, options: { requestedBy?: string; subject?: string } = {}): Promise<JobConfig> {
    const config = await createDataJob(this.zk, body, options.subject ?? 'POST /api/jobs');
    // Any write of the new node will do: the job listed and its config read.
    await this.model?.configCaughtUp(config.name, { version: 0, ctimeMs: 0 });
    this.log.info({ job: config.name, type: config.type, requestedBy: options.requestedBy }, 'job created');
    return config;
  }

  /** Removes `job` from ZooKeeper and its requests from Redis; see {@link RemoveJobResult}. */
  removeJob(job: string, options?: RemoveJobOptions): Promise<RemoveJobResult> {
    return removeJob({ zk: this.zk, redis: this.redis, queuePrefix: this.options.queuePrefix ?? QUEUE_PREFIX, namespace: this.namespace, log: this.log }, job, options);
  }

  /** monitorExecution's lock in this namespace (`/.cluster/item-lock`); undefined until its first worker recorded one. */
  itemLock(): Promise<ItemLockMode | undefined> {
    return readItemLockMode(this.zk);
  }

  /**
   * Switches the namespace's item lock; SHARDCRON_CONFLICT while any worker is live unless `force`
   * (each worker keeps the lock it started with).
   */
  setItemLock(mode: ItemLockMode, force = false): Promise<ItemLockSwitch> {
    return this.logged('item lock set', { mode, force }, setItemLockMode(this.zk, mode, force));
  }

  /** Every job with a valid config, sorted by name. */
  listJobs(): Promise<JobSummary[]> {
    return this.readModel().listJobs();
  }

  /** One job with its items. */
  getJob(job: string): Promise<JobDetail> {
    return this.readModel().getJob(job);
  }

  /** Every live worker instance and its jobs. */
  listInstances(): Promise<InstanceSummary[]> {
    return this.readModel().listInstances();
  }

  /** The queues of the live worker instances, sorted by instance id (no job lists: cheap at 100,000 jobs). */
  liveQueues(): Promise<string[]> {
    return this.readModel().liveQueues();
  }

  /** Nodes the read model could not read (corrupt data), with their paths. */
  problems(): DataProblem[] {
    return this.model?.problems() ?? [];
  }

  /** The read model behind the read methods, made (not started) on first use. */
  readModel(): ReadModel {
    const itemRuns = (job: string, items: readonly number[]) => readItemRuns(this.redis, this.namespace, job, items);
    return (this.model ??= new ReadModel({ itemRuns, ...this.options.readModel, zk: this.zk, logger: this.log }));
  }

  /** Closes the read model, then the connections when it owns them. Idempotent; each step runs even if one failed. */
  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private async switchJob(job: string, disabled: boolean): Promise<SwitchResult> {
    const { changed, configStamp } = await setJobDisabled(this.zk, job, disabled);
    await this.model?.configCaughtUp(job, configStamp);
    return { changed };
  }

  private async switchItem(job: string, itemValue: number | string, disabled: boolean): Promise<SwitchResult> {
    const { changed, configStamp, item } = await setItemDisabled(this.zk, job, itemValue, disabled);
    await this.model?.itemCaughtUp(job, item, disabled, configStamp);
    return { changed };
  }

  private async logged<T extends object>(what: string, fields: Record<string, unknown>, operation: Promise<T>): Promise<T> {
    const result = await operation;
    const logged: Record<string, unknown> = { ...fields, ...result };
    this.log.info(logged, what);
    return result;
  }

  private async doClose(): Promise<void> {
    const steps: Array<() => Promise<unknown>> = [async () => this.model?.close()];
    if (this.options.ownsConnections) steps.push(() => this.zk.close(), async () => this.redis.disconnect());
    for (const step of steps) await step().catch((err: unknown) => this.log.warn({ err }, 'admin cleanup failed'));
  }
}
