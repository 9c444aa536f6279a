import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/job-definition';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import { parseShardingItemParameters } from '../shared/sharding-item-parameters';
import { ZkError, type ZkClient } from '../shared/zk';
import { parseCompletedFires, withCompletedFire } from './completed-fires';

/** A misfire mark as read: the fire it asks for, and the node version to delete it with. */
interface MisfireMark {
  fireTime: number;
  version: number;
}

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

  /**
   * Executes the request; resolves with the final status of its last run, or `deferred` when a
   * request that must run (a FAILOVER, or one put back after an abort) found the item running: such
   * a request is work that was assigned and not done, so it waits for the lock and runs under its
   * own fire time instead of being folded into a misfire that a newer fire could coalesce.
   */
  async run(definition: ResolvedJobDefinition, request: ExecutionRequest, options: { mustRun?: boolean } = {}): Promise<ExecutionStatus | 'deferred'> {
    const config = this.ctx.config(request.job);
    if (config.disabled) return this.skipped(request, 'job disabled');
    const key = `${request.job}|${request.item}`;
    const mustRun = request.source === 'FAILOVER' || options.mustRun === true;
    let current: ExecutionRequest = request;
    /** The misfire mark the current round stands for; deleted only when that round completes. */
    let mark: MisfireMark | undefined;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      if (!(await this.acquire(config, current, key, !mustRun))) {
        if (round > 0) return status; // the mark stays for whoever holds the item now
        return mustRun ? 'deferred' : this.skipped(current, 'item running elsewhere; misfire recorded');
      }
      const done = config.monitorExecution ? await this.completedFires(current) : undefined;
      if (done?.list.includes(current.fireTime)) {
        await this.release(config, current, key, undefined, mark);
        status = this.skipped(current, 'this fire of the item already completed');
      } else {
        const marked = current.source === 'FAILOVER' && (await this.markFailover(current));
        const round = current;
        const roundMark = mark;
        let released = false;
        // The release runs before the run's outcome is reported: a run counts as completed only
        // once its completion is recorded with the release of the lock. One that could not be
        // (the session was lost between the handler's return and the release) is reported aborted
        // and its request goes back to the queue, instead of being logged as done while ZooKeeper
        // does not know it, which let its failed-over request complete the fire a second time.
        const settle = async (outcome: ExecutionStatus): Promise<ExecutionStatus> => {
          released = true;
          const completed = outcome === 'completed';
          const recorded = await this.release(config, round, key, completed ? done : undefined, completed ? roundMark : undefined).catch((err) => {
            this.ctx.log.warn({ err, job: round.job, item: round.item }, 'could not release the item after its run');
            return false;
          });
          return completed && !recorded ? 'aborted' : outcome;
        };
        try {
          status = await this.execute(definition, config, current, settle);
        } finally {
          if (!released) await this.release(config, current, key, undefined, undefined);
          if (marked) await this.ctx.zk.delete(registryPaths.shardingFailover(current.job, current.item)).catch(() => undefined);
        }
      }
      if (status === 'aborted') return status;
      const next = await this.peekMisfire(config, current, key);
      // The same mark again means we could not delete it: stop rather than loop (the next holder
      // takes it). A re-created mark is new even at version 0: it carries another fire time.
      if (!next || (mark && next.version === mark.version && next.fireTime === mark.fireTime)) return status;
      mark = next;
      // The re-run stands for the fire that found the item running, under that fire's time.
      current = { ...current, source: 'MISFIRE', fireTime: next.fireTime };
    }
  }

  private async acquire(config: JobConfig, request: ExecutionRequest, key: string, markOnBusy: boolean): Promise<boolean> {
    if (!config.monitorExecution) {
      if (this.localRunning.has(key)) {
        if (config.misfire && markOnBusy) this.localMisfire.set(key, Math.max(this.localMisfire.get(key) ?? 0, request.fireTime));
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
      if (!config.misfire || !markOnBusy) return false;
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
   * Deletes the running node. After a completion it also records the fire, and deletes the misfire
   * mark the run stood for, in the same multi: the next holder can never see the item unlocked
   * without seeing that this fire is done and its mark consumed.
   */
  private async release(
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    completedFrom?: { list: number[] },
    mark?: MisfireMark,
  ): Promise<boolean> {
    if (!config.monitorExecution) {
      this.localRunning.delete(key);
      return true;
    }
    const { job, item, fireTime } = request;
    const running = registryPaths.shardingRunning(job, item);
    // Only our own lock may be released. If our session expired meanwhile, the server removed our
    // node and another instance may hold the item now: deleting "running" would let a third one in.
    const stat = await this.ctx.zk.exists(running).catch(() => null);
    if (!stat || stat.ephemeralOwner !== this.ctx.zk.sessionId) return false;
    for (const withMark of mark ? [true, false] : [false]) {
      if (!completedFrom && !withMark) break;
      const tx = this.ctx.zk.multi();
      if (completedFrom) tx.set(registryPaths.shardingItem(job, item), JSON.stringify(withCompletedFire(completedFrom.list, fireTime)));
      tx.delete(running, stat.version);
      if (withMark) tx.delete(registryPaths.shardingMisfire(job, item), mark!.version);
      try {
        await tx.commit();
        return true;
      } catch (err) {
        // A newer fire changed the mark: keep it (it is taken next round) and commit the rest.
        if (withMark && err instanceof ZkError && (err.code === ErrorCodes.ZK_BAD_VERSION || err.code === ErrorCodes.ZK_NO_NODE)) continue;
        this.ctx.log.warn({ err, job, item }, 'could not record the completion; releasing the item only');
        break;
      }
    }
    await this.ctx.zk.delete(running, stat.version).catch((err) => {
      // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) this.ctx.log.warn({ err, job, item }, 'could not delete running node');
    });
    return false;
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
   * The misfire mark left for this item, if any, without consuming it: it is deleted only together
   * with the completion of the re-run, so a holder that dies during the re-run leaves it for the
   * next one. A mark without a readable time (written by another tool) stands for the current fire.
   */
  private async peekMisfire(config: JobConfig, request: ExecutionRequest, key: string): Promise<MisfireMark | undefined> {
    if (!config.misfire) return undefined;
    if (!config.monitorExecution) {
      const fireTime = this.localMisfire.get(key);
      this.localMisfire.delete(key);
      return fireTime === undefined ? undefined : { fireTime, version: -1 };
    }
    try {
      const { data, stat } = await this.ctx.zk.get(registryPaths.shardingMisfire(request.job, request.item));
      const fireTime = Number(data.toString());
      return { fireTime: Number.isSafeInteger(fireTime) && fireTime > 0 ? fireTime : request.fireTime, version: stat.version };
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return undefined;
      throw err;
    }
  }

  /**
   * Runs the handler. `settle` gets the handler's outcome before it is reported (the finish record,
   * `afterExecute`) and may turn a completion into `aborted` when it could not be recorded.
   */
  private async execute(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    settle: (status: ExecutionStatus) => Promise<ExecutionStatus> = async (status) => status,
  ): Promise<ExecutionStatus> {
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
    const settled = await settle(outcome.status);
    let reason: string | undefined;
    if (settled !== outcome.status) {
      reason = 'the completion could not be recorded in ZooKeeper (session lost or unreachable)';
      outcome = { ...outcome, status: settled };
    }
    // `at` is when the handler ended, not when the release answered: the run stopped then.
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: outcome.status, reason, at: started + outcome.durationMs });
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
