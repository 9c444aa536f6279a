import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/job-definition';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import { parseShardingItemParameters } from '../shared/sharding-item-parameters';
import { ZkError, type ZkClient } from '../shared/zk';
import { parseCompletedFires, withCompletedFire } from './completed-fires';

/** One line of the execution log: what ran where, for which fire, and how it ended. */
export interface ExecutionRecord {
  event: 'start' | 'finish';
  job: string;
  fireTime: number;
  item: number;
  instanceId: string;
  source: ExecutionSource;
  /** On `finish`: how it ended; `skipped` executions have no `start`. */
  status?: ExecutionStatus;
  reason?: string;
  at: number;
}

export interface ExecutorContext {
  zk: ZkClient;
  instanceId: string;
  log: Logger;
  /** The current config of a job (kept fresh by a watch), falling back to the definition's. */
  config(job: string): JobConfig;
  /** False once the session this execution started under is gone or suspended. */
  owns(sessionId: string): boolean;
  /** The signal aborted when every execution must stop (session lost, forced shutdown). */
  abortSignal(): AbortSignal;
  record(record: ExecutionRecord): void;
}

/**
 * Runs one execution request (DESIGN.md flow 4). With monitorExecution the `running` ephemeral
 * node is the lock that makes I1 hold: whoever creates it runs the item; a request that finds it
 * taken sets `misfire` (when enabled) and the holder runs the item once more when it finishes.
 * Without monitorExecution the same rule applies within this process only.
 */
export class ItemExecutor {
  private readonly localRunning = new Set<string>();
  /** item key -> latest fire time that found it running (monitorExecution off). */
  private readonly localMisfire = new Map<string, number>();

  constructor(private readonly ctx: ExecutorContext) {}

  /** Executes the request; resolves with the final status of its last run. */
  async run(definition: ResolvedJobDefinition, request: ExecutionRequest): Promise<ExecutionStatus> {
    const config = this.ctx.config(request.job);
    if (config.disabled) return this.skipped(request, 'job disabled');
    const key = `${request.job}|${request.item}`;
    let current: ExecutionRequest = request;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      if (!(await this.acquire(config, current, key))) {
        return round === 0 ? this.skipped(current, 'item running elsewhere; misfire recorded') : status;
      }
      const done = config.monitorExecution ? await this.completedFires(current) : undefined;
      if (done?.list.includes(current.fireTime)) {
        await this.release(config, current, key);
        status = this.skipped(current, 'this fire of the item already completed');
      } else {
        const marked = current.source === 'FAILOVER' && (await this.markFailover(current));
        try {
          status = await this.execute(definition, config, current);
        } finally {
          await this.release(config, current, key, status === 'completed' ? done : undefined);
          if (marked) await this.ctx.zk.delete(registryPaths.shardingFailover(current.job, current.item)).catch(() => undefined);
        }
      }
      if (status === 'aborted') return status;
      const missed = await this.takeMisfire(config, current, key);
      if (missed === undefined) return status;
      // The re-run stands for the fire that found the item running, under that fire's time.
      current = { ...current, source: 'MISFIRE', fireTime: missed };
    }
  }

  private async acquire(config: JobConfig, request: ExecutionRequest, key: string): Promise<boolean> {
    if (!config.monitorExecution) {
      if (this.localRunning.has(key)) {
        if (config.misfire) this.localMisfire.set(key, Math.max(this.localMisfire.get(key) ?? 0, request.fireTime));
        return false;
      }
      this.localRunning.add(key);
      return true;
    }
    const running = registryPaths.shardingRunning(request.job, request.item);
    // Twice: a holder may finish between our failed create and our misfire mark, and then it
    // would not see the mark; re-checking after marking closes that gap.
    for (let attempt = 0; attempt < 2; attempt += 1) {
      try {
        await this.createRunning(running);
        return true;
      } catch (err) {
        if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NODE_EXISTS)) throw err;
      }
      if (!config.misfire) return false;
      await this.markMisfire(request);
      if (await this.ctx.zk.exists(running)) return false;
    }
    return false;
  }

  private async createRunning(path: string): Promise<void> {
    try {
      await this.ctx.zk.create(path, this.ctx.instanceId, 'ephemeral');
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
      await this.ctx.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
      await this.ctx.zk.create(path, this.ctx.instanceId, 'ephemeral');
    }
  }

  /** `sharding/{i}/failover` tells operators which instance runs a failed-over item. */
  private async markFailover(request: ExecutionRequest): Promise<boolean> {
    try {
      await this.ctx.zk.create(registryPaths.shardingFailover(request.job, request.item), this.ctx.instanceId, 'ephemeral');
      return true;
    } catch (err) {
      this.ctx.log.debug({ err, job: request.job, item: request.item }, 'failover marker not written');
      return false;
    }
  }

  /** The item's recently completed fire times (read while holding its running node). */
  private async completedFires(request: ExecutionRequest): Promise<{ list: number[]; version: number }> {
    try {
      const { data, stat } = await this.ctx.zk.get(registryPaths.shardingItem(request.job, request.item));
      return { list: parseCompletedFires(data), version: stat.version };
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return { list: [], version: -1 };
      throw err;
    }
  }

  /**
   * Deletes the running node; after a completion, records the fire in the same multi, so the next
   * holder can never see the item unlocked without also seeing that this fire is done.
   */
  private async release(config: JobConfig, request: ExecutionRequest, key: string, completedFrom?: { list: number[] }): Promise<void> {
    if (!config.monitorExecution) {
      this.localRunning.delete(key);
      return;
    }
    const running = registryPaths.shardingRunning(request.job, request.item);
    if (completedFrom) {
      const list = withCompletedFire(completedFrom.list, request.fireTime);
      try {
        await this.ctx.zk.multi().set(registryPaths.shardingItem(request.job, request.item), JSON.stringify(list)).delete(running).commit();
        return;
      } catch (err) {
        this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not record the completion; releasing the item only');
      }
    }
    await this.ctx.zk.delete(running).catch((err) => {
      // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not delete running node');
    });
  }

  /** Records (in `sharding/{i}/misfire`) the latest fire time that found the item running. */
  private async markMisfire(request: ExecutionRequest): Promise<void> {
    const path = registryPaths.shardingMisfire(request.job, request.item);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        const { data, stat } = await this.ctx.zk.get(path);
        if (Number(data.toString()) >= request.fireTime) return;
        await this.ctx.zk.set(path, String(request.fireTime), stat.version);
        return;
      } catch (err) {
        if (!(err instanceof ZkError)) throw err;
        if (err.code === ErrorCodes.ZK_NO_NODE) {
          await this.ctx.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
          await this.ctx.zk.create(path, String(request.fireTime)).catch((e) => {
            if (!(e instanceof ZkError && e.code === ErrorCodes.ZK_NODE_EXISTS)) throw e;
          });
          continue;
        }
        if (err.code !== ErrorCodes.ZK_BAD_VERSION && err.code !== ErrorCodes.ZK_NODE_EXISTS) throw err;
      }
    }
  }

  /**
   * The fire time a misfire asked for (and the mark cleared), or undefined when none. A mark
   * without a readable time (written by another tool) stands for the current request's fire.
   */
  private async takeMisfire(config: JobConfig, request: ExecutionRequest, key: string): Promise<number | undefined> {
    if (!config.misfire) return undefined;
    if (!config.monitorExecution) {
      const fireTime = this.localMisfire.get(key);
      this.localMisfire.delete(key);
      return fireTime;
    }
    const path = registryPaths.shardingMisfire(request.job, request.item);
    try {
      const { data, stat } = await this.ctx.zk.get(path);
      await this.ctx.zk.delete(path, stat.version);
      const fireTime = Number(data.toString());
      return Number.isSafeInteger(fireTime) && fireTime > 0 ? fireTime : request.fireTime;
    } catch (err) {
      // Absent: no misfire. Changed meanwhile: a newer fire marked it; the next round takes it.
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return undefined;
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_BAD_VERSION) return this.takeMisfire(config, request, key);
      throw err;
    }
  }

  private async execute(definition: ResolvedJobDefinition, config: JobConfig, request: ExecutionRequest): Promise<ExecutionStatus> {
    const { job, item, fireTime, source } = request;
    const controller = new AbortController();
    const stopAll = this.ctx.abortSignal();
    const onAbortAll = () => controller.abort(stopAll.reason);
    if (stopAll.aborted) return this.skipped(request, 'worker stopping');
    stopAll.addEventListener('abort', onAbortAll, { once: true });
    const sessionId = this.ctx.zk.sessionId;
    const log = this.ctx.log.child({ job, item, fireTime });
    const context: ShardingContext = {
      jobName: job,
      taskId: formatTaskId({ jobName: job, fireTime, shardingItem: item, instanceId: this.ctx.instanceId }),
      shardingTotalCount: config.shardingTotalCount,
      jobParameter: config.jobParameter,
      shardingItem: item,
      shardingParameter: parseShardingItemParameters(config.shardingItemParameters)[item] ?? '',
      fireTime,
      source,
      instanceId: this.ctx.instanceId,
      signal: controller.signal,
      assertOwnership: () => {
        if (controller.signal.aborted || !this.ctx.owns(sessionId)) {
          throw new ShardcronError(ErrorCodes.NOT_OWNER, `execution of ${job} item ${item} (fire ${fireTime}) may no longer be ours`, { job, item, fireTime });
        }
      },
      log,
    };
    const started = Date.now();
    this.ctx.record({ event: 'start', job, fireTime, item, instanceId: this.ctx.instanceId, source, at: started });
    await this.callListener(() => definition.listeners.beforeExecute?.(context), log);
    let outcome: ExecutionOutcome;
    try {
      await definition.execute(context);
      // Finishing after our ownership ended is not a completion: the item may already run elsewhere.
      const stillOurs = !controller.signal.aborted && this.ctx.owns(sessionId);
      outcome = { status: stillOurs ? 'completed' : 'aborted', durationMs: Date.now() - started };
    } catch (error) {
      outcome = { status: controller.signal.aborted ? 'aborted' : 'failed', error, durationMs: Date.now() - started };
      await this.handleError(definition, error, context, log);
    } finally {
      stopAll.removeEventListener('abort', onAbortAll);
    }
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: outcome.status, at: Date.now() });
    await this.callListener(() => definition.listeners.afterExecute?.(context, outcome), log);
    return outcome.status;
  }

  private async handleError(definition: ResolvedJobDefinition, error: unknown, context: ShardingContext, log: Logger): Promise<void> {
    const handler = definition.errorHandler;
    if (handler === 'IGNORE') return;
    if (handler === 'LOG') {
      log.error({ err: error }, 'job execution failed');
      return;
    }
    try {
      await handler(error, context);
    } catch (err) {
      log.error({ err, original: error }, 'the job error handler threw');
    }
  }

  private async callListener(fn: () => unknown, log: Logger): Promise<void> {
    try {
      await fn();
    } catch (err) {
      log.error({ err }, 'job listener threw; ignored');
    }
  }

  private skipped(request: ExecutionRequest, reason: string): ExecutionStatus {
    const { job, fireTime, item, source } = request;
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'skipped', reason, at: Date.now() });
    return 'skipped';
  }
}
