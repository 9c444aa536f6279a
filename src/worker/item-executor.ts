import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/job-definition';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import { parseShardingItemParameters } from '../shared/sharding-item-parameters';
import { ZkError, type ZkClient } from '../shared/zk';

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
  private readonly localMisfire = new Set<string>();

  constructor(private readonly ctx: ExecutorContext) {}

  /** Executes the request; resolves with the final status of its last run. */
  async run(definition: ResolvedJobDefinition, request: ExecutionRequest): Promise<ExecutionStatus> {
    const config = this.ctx.config(request.job);
    if (config.disabled) return this.skipped(request, 'job disabled');
    const key = `${request.job}|${request.item}`;
    let source = request.source;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      if (!(await this.acquire(config, request, key))) {
        return round === 0 ? this.skipped(request, 'item running elsewhere; misfire recorded') : status;
      }
      const marked = request.source === 'FAILOVER' && (await this.markFailover(request));
      try {
        status = await this.execute(definition, config, { ...request, source });
      } finally {
        await this.release(config, request, key);
        if (marked) await this.ctx.zk.delete(registryPaths.shardingFailover(request.job, request.item)).catch(() => undefined);
      }
      if (status === 'aborted' || !(await this.takeMisfire(config, request, key))) return status;
      source = 'MISFIRE';
    }
  }

  private async acquire(config: JobConfig, request: ExecutionRequest, key: string): Promise<boolean> {
    if (!config.monitorExecution) {
      if (this.localRunning.has(key)) {
        if (config.misfire) this.localMisfire.add(key);
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
      await this.ctx.zk.ensurePath(registryPaths.shardingMisfire(request.job, request.item));
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

  private async release(config: JobConfig, request: ExecutionRequest, key: string): Promise<void> {
    if (!config.monitorExecution) {
      this.localRunning.delete(key);
      return;
    }
    await this.ctx.zk.delete(registryPaths.shardingRunning(request.job, request.item)).catch((err) => {
      // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) this.ctx.log.warn({ err, job: request.job, item: request.item }, 'could not delete running node');
    });
  }

  /** True (and the mark cleared) when a fire found this item running and asked for one more run. */
  private async takeMisfire(config: JobConfig, request: ExecutionRequest, key: string): Promise<boolean> {
    if (!config.misfire) return false;
    if (!config.monitorExecution) return this.localMisfire.delete(key);
    try {
      await this.ctx.zk.delete(registryPaths.shardingMisfire(request.job, request.item));
      return true;
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return false;
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
