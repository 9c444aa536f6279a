import { Worker, type Job } from 'bullmq';
import IORedis, { type Redis } from 'ioredis';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { executionRequestSchema } from '../shared/execution-request';
import { jobConfigCodec, type JobConfig } from '../shared/job-config';
import type { ResolvedJobDefinition } from '../shared/job-definition';
import { silentLogger, type Logger } from '../shared/logger';
import { QUEUE_PREFIX } from '../shared/queue-names';
import { registryPaths } from '../shared/registry-paths';
import { TypedEmitter } from '../shared/typed-emitter';
import { NodeCache, type ZkClient } from '../shared/zk';
import { InstanceRegistration, type Incarnation } from './instance-registration';
import { ItemExecutor, type ExecutionRecord } from './item-executor';

export interface WorkerServiceOptions {
  zk: ZkClient;
  redisUrl: string;
  namespace: string;
  instanceId: string;
  ip: string;
  jobs: readonly ResolvedJobDefinition[];
  /** Executions run at once by this instance. */
  concurrency: number;
  logger?: Logger;
}

export interface WorkerServiceEvents {
  [event: string]: object;
  'worker:registered': Incarnation;
  'item:started': ExecutionRecord;
  'item:finished': ExecutionRecord;
}

/**
 * The worker role: registers an instance for each job it can run and executes the requests the
 * leader puts on this incarnation's queue. It stops taking requests the moment ZooKeeper is
 * suspended, aborts its executions when the session is lost, and comes back as a new incarnation
 * (new queue) on the new session: requests addressed to the old one are the leader's to move.
 */
export class WorkerService extends TypedEmitter<WorkerServiceEvents> {
  private readonly log: Logger;
  private readonly registration: InstanceRegistration;
  private readonly executor: ItemExecutor;
  private readonly definitions: ReadonlyMap<string, ResolvedJobDefinition>;
  private readonly configCaches = new Map<string, NodeCache<JobConfig>>();
  private readonly unsubscribe: Array<() => void> = [];
  private connection: Redis | undefined;
  private consumer: Worker | undefined;
  private abortAll = new AbortController();
  private closing: Promise<void> | undefined;

  constructor(private readonly options: WorkerServiceOptions) {
    const log = (options.logger ?? silentLogger).child({ component: 'worker', instanceId: options.instanceId });
    super(log);
    this.log = log;
    this.definitions = new Map(options.jobs.map((d) => [d.name, d]));
    this.registration = new InstanceRegistration(options.zk, { ...options, log });
    this.executor = new ItemExecutor({
      zk: options.zk,
      instanceId: options.instanceId,
      log,
      config: (job) => this.configCaches.get(job)?.value ?? this.definitions.get(job)!.config,
      owns: (sessionId) => options.zk.state === 'connected' && options.zk.sessionId === sessionId,
      abortSignal: () => this.abortAll.signal,
      record: (record) => this.emit(record.event === 'start' ? 'item:started' : 'item:finished', record),
    });
  }

  get instanceId(): string {
    return this.options.instanceId;
  }

  /** The queue of the current incarnation. */
  get queue(): string | undefined {
    return this.registration.incarnation?.queue;
  }

  async start(): Promise<this> {
    const { zk } = this.options;
    for (const job of this.options.jobs) {
      const path = registryPaths.jobConfig(job.name);
      this.configCaches.set(job.name, new NodeCache(zk, { path, decode: (d) => jobConfigCodec.decode(d, path), logger: this.log }));
    }
    this.connection = new IORedis(this.options.redisUrl, { maxRetriesPerRequest: null });
    this.unsubscribe.push(
      zk.on('suspended', () => void this.consumer?.pause(true)),
      zk.on('reconnected', () => this.consumer?.resume()),
      zk.on('lost', () => void this.onSessionLost()),
      zk.on('session:renewed', () => void this.startIncarnation().catch((err) => this.log.error({ err }, 'could not register again'))),
    );
    await this.startIncarnation();
    await Promise.all([...this.configCaches.values()].map((c) => c.start()));
    return this;
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  private async startIncarnation(): Promise<void> {
    const incarnation = await this.registration.register();
    await this.consumer?.close(true);
    this.consumer = new Worker(incarnation.queue, (job) => this.process(job), {
      connection: this.connection!,
      prefix: QUEUE_PREFIX,
      concurrency: this.options.concurrency,
    });
    this.consumer.on('error', (err) => this.log.warn({ err }, 'queue consumer error'));
    this.emit('worker:registered', incarnation);
  }

  /** The session is gone: our items may be failed over now, so stop them (invariant I4). */
  private async onSessionLost(): Promise<void> {
    const controller = this.abortAll;
    this.abortAll = new AbortController();
    controller.abort(new ShardcronError(ErrorCodes.NOT_OWNER, 'ZooKeeper session lost; executions aborted'));
    const consumer = this.consumer;
    this.consumer = undefined;
    await consumer?.close(true).catch((err) => this.log.warn({ err }, 'closing the old consumer failed'));
  }

  private async process(job: Job): Promise<string> {
    const parsed = executionRequestSchema.safeParse(job.data);
    if (!parsed.success) {
      throw new ShardcronError(ErrorCodes.CORRUPT_DATA, `malformed execution request ${job.id}: ${parsed.error.message}`);
    }
    const request = parsed.data;
    const definition = this.definitions.get(request.job);
    if (!definition) {
      throw new ShardcronError(ErrorCodes.INVALID_CONFIG, `this instance has no handler for job ${request.job}`, { job: request.job });
    }
    const status = await this.executor.run(definition, request);
    // Marks the BullMQ job failed, so the queue's own tools show it; the job's errorHandler already ran.
    if (status === 'failed') throw new ShardcronError(ErrorCodes.EXECUTION_FAILED, `job ${request.job} item ${request.item} failed`, { job: request.job });
    return status;
  }

  private async doClose(): Promise<void> {
    for (const off of this.unsubscribe.splice(0)) off();
    const consumer = this.consumer;
    this.consumer = undefined;
    // Let running executions finish (graceful drain arrives with the shutdown work), then leave.
    await consumer?.close().catch((err) => this.log.warn({ err }, 'closing the consumer failed'));
    await this.registration.unregister().catch(() => undefined);
    await Promise.allSettled([...this.configCaches.values()].map((c) => c.close()));
    await this.connection?.quit().catch(() => undefined);
    this.removeAllListeners();
  }
}
