import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ExecutionRequest, ExecutionSource } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import type { ExecutionOutcome, ExecutionStatus, ResolvedJobDefinition, ShardingContext } from '../shared/job-definition';
import type { Logger } from '../shared/logger';
import type { ZkClient } from '../shared/zk';
import { ItemLocks, type MisfireMark } from './item-lock';
import { createShardingContext } from './sharding-context';

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
 *
 * The ZooKeeper protocol (lock, duplicate check, marks) is {@link ItemLocks}'.
 */
export class ItemExecutor {
  /** Items (`{job}|{item}`) an execution of this process runs (monitorExecution off). */
  private readonly localRunning = new Set<string>();
  /** item key -> latest fire time that found it running (monitorExecution off). */
  private readonly localMisfire = new Map<string, number>();
  private readonly locks: ItemLocks;

  constructor(private readonly ctx: ExecutorContext) {
    this.locks = new ItemLocks(ctx);
  }

  /**
   * Executes the request; resolves with the final status of its last run, or `deferred` when a
   * request that must run (a FAILOVER, or one put back after an abort) found the item running: such
   * a request is work that was assigned and not done, so it waits for the lock and runs under its
   * own fire time instead of being folded into a misfire that a newer fire could coalesce.
   */
  async run(definition: ResolvedJobDefinition, request: ExecutionRequest, options: { mustRun?: boolean } = {}): Promise<ExecutionStatus | 'deferred'> {
    const config = this.ctx.config(request.job);
    if (config.disabled) return this.skipped(request, 'job disabled');
    const mustRun = request.source === 'FAILOVER' || options.mustRun === true;
    return config.monitorExecution ? this.runMonitored(definition, config, request, mustRun) : this.runLocal(definition, config, request, mustRun);
  }

  private async runLocal(definition: ResolvedJobDefinition, config: JobConfig, request: ExecutionRequest, mustRun: boolean): Promise<ExecutionStatus | 'deferred'> {
    const key = `${request.job}|${request.item}`;
    let current = request;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      if (this.localRunning.has(key)) {
        if (round > 0) return status;
        if (config.misfire && !mustRun) this.localMisfire.set(key, Math.max(this.localMisfire.get(key) ?? 0, current.fireTime));
        return mustRun ? 'deferred' : this.skipped(current, 'item running elsewhere; misfire recorded');
      }
      this.localRunning.add(key);
      try {
        status = await this.execute(definition, config, current, this.ctx.zk.sessionId);
      } finally {
        this.localRunning.delete(key);
      }
      if (status === 'aborted' || !config.misfire) return status;
      const fireTime = this.localMisfire.get(key);
      if (fireTime === undefined) return status;
      this.localMisfire.delete(key);
      current = { ...current, source: 'MISFIRE', fireTime };
    }
  }

  private async runMonitored(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    mustRun: boolean,
  ): Promise<ExecutionStatus | 'deferred'> {
    const key = `${request.job}|${request.item}`;
    let current: ExecutionRequest = request;
    /** The misfire mark the current round stands for; deleted only when that round completes. */
    let mark: MisfireMark | undefined;
    let status: ExecutionStatus = 'skipped';
    for (let round = 0; ; round += 1) {
      // Everything from the lock to its release runs on the session that took the lock.
      const zk = this.ctx.zk.onSession(this.ctx.zk.sessionId);
      // After round 0 a mark is known to exist: a holder we meet must hear of it.
      const held = await this.locks.acquire(zk, config, current, key, !mustRun, round > 0);
      if (!held) {
        if (round > 0) return status; // the mark stays for whoever holds the item now (told by acquire)
        return mustRun ? 'deferred' : this.skipped(current, 'item running elsewhere; misfire recorded');
      }
      let next: MisfireMark | undefined;
      // Re-read the mark under the lock: between our release and this acquire another holder may
      // have run and consumed it, and a new mark (at version 0 again) may stand there now.
      const unlockOnError = async (err: unknown): Promise<never> => {
        await this.locks.release(zk, config, current, key, held, { completed: false, watchMarks: false, failoverMarker: false }).catch(() => undefined);
        throw err;
      };
      if (mark && !(mark = await this.locks.readMark(zk, current).catch(unlockOnError))) {
        next = (await this.locks.release(zk, config, current, key, held, { completed: false, watchMarks: true, failoverMarker: false })).found;
      } else {
        if (mark) current = { ...current, fireTime: mark.fireTime };
        if (held.fires.list.includes(current.fireTime)) {
          next = (await this.locks.release(zk, config, current, key, held, { completed: false, consume: mark, watchMarks: true, failoverMarker: false })).found;
          // A re-run whose fire already completed changes nothing: the request's status stays that of its last run.
          const skipped = this.skipped(current, 'this fire of the item already completed');
          if (round === 0) status = skipped;
        } else {
          const marked = current.source === 'FAILOVER' && (await this.locks.markFailover(zk, current));
          const round = current;
          const roundMark = mark;
          let released = false;
          // Runs when the handler is done, before its outcome is reported: a run counts as completed
          // only once its completion is recorded with the release of the lock.
          const settle = async (outcome: ExecutionStatus): Promise<ExecutionStatus> => {
            released = true;
            const completed = outcome === 'completed';
            // A mark round that did not complete keeps its mark, which we know exists.
            const watchMarks = outcome !== 'aborted' && !(roundMark && !completed);
            const result = await this.locks.release(zk, config, round, key, held, { completed, consume: completed ? roundMark : undefined, watchMarks, failoverMarker: marked });
            next = result.found;
            return completed && !result.recorded ? 'aborted' : outcome;
          };
          try {
            status = await this.execute(definition, config, current, zk.sessionId, settle);
          } finally {
            if (!released) next = (await this.locks.release(zk, config, current, key, held, { completed: false, watchMarks: status !== 'aborted' && !mark, failoverMarker: marked })).found;
          }
        }
      }
      if (status === 'aborted' || !next) return status;
      // The same mark again means we could not delete it: stop rather than loop (the next holder
      // takes it). A re-created mark is new even at version 0: it carries another fire time.
      if (mark && next.version === mark.version && next.fireTime === mark.fireTime) {
        this.locks.forget(key); // we leave a mark behind: our next lock must look for it
        return status;
      }
      mark = next;
      // The re-run stands for the fire that found the item running, under that fire's time.
      current = { ...current, source: 'MISFIRE', fireTime: next.fireTime };
    }
  }

  /**
   * Runs the handler. `settle` gets the handler's outcome before it is reported (the finish record,
   * `afterExecute`) and may turn it into another status: a completion that could not be recorded
   * is reported as aborted.
   */
  private async execute(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    request: ExecutionRequest,
    sessionId: string,
    settle: (status: ExecutionStatus) => Promise<ExecutionStatus> = async (status) => status,
  ): Promise<ExecutionStatus> {
    const { job, item, fireTime, source } = request;
    const stopAll = this.ctx.abortSignal();
    if (stopAll.aborted) return this.skipped(request, 'worker stopping');
    // The execution's own signal, chained to the worker's stop signal, made only if the handler
    // reads ctx.signal: its own, so listeners a handler leaves on it go away with the execution.
    let controller: AbortController | undefined;
    const onStop = () => controller!.abort(stopAll.reason);
    const makeSignal = () => {
      controller = new AbortController();
      if (stopAll.aborted) controller.abort(stopAll.reason);
      else stopAll.addEventListener('abort', onStop, { once: true });
      return controller.signal;
    };
    const assertOwnership = () => {
      if (stopAll.aborted || !this.ctx.owns(sessionId)) {
        throw new ShardcronError(ErrorCodes.NOT_OWNER, `execution of ${job} item ${item} (fire ${fireTime}) may no longer be ours`, { job, item, fireTime });
      }
    };
    const context = createShardingContext(config, request, this.ctx.instanceId, makeSignal, assertOwnership, this.ctx.log);
    const { beforeExecute, afterExecute } = definition.listeners;
    const started = Date.now();
    this.ctx.record({ event: 'start', job, fireTime, item, instanceId: this.ctx.instanceId, source, at: started });
    if (beforeExecute) await this.callListener(() => beforeExecute(context), context);
    let outcome: ExecutionOutcome;
    try {
      await definition.execute(context);
      // Finishing after our ownership ended is not a completion: the item may already run elsewhere.
      const stillOurs = !stopAll.aborted && this.ctx.owns(sessionId);
      outcome = { status: stillOurs ? 'completed' : 'aborted', durationMs: Date.now() - started };
    } catch (error) {
      outcome = { status: stopAll.aborted ? 'aborted' : 'failed', error, durationMs: Date.now() - started };
      await this.handleError(definition, error, context);
    } finally {
      if (controller) stopAll.removeEventListener('abort', onStop);
    }
    const settled = await settle(outcome.status);
    let reason: string | undefined;
    if (settled !== outcome.status) {
      reason = 'the completion could not be recorded in ZooKeeper (session lost or unreachable)';
      outcome = { ...outcome, status: settled };
    }
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: outcome.status, reason, at: Date.now() });
    if (afterExecute) await this.callListener(() => afterExecute(context, outcome), context);
    return outcome.status;
  }

  private async handleError(definition: ResolvedJobDefinition, error: unknown, context: ShardingContext): Promise<void> {
    const handler = definition.errorHandler;
    if (handler === 'IGNORE') return;
    if (handler === 'LOG') {
      context.log.error({ err: error }, 'job execution failed');
      return;
    }
    try {
      await handler(error, context);
    } catch (err) {
      context.log.error({ err, original: error }, 'the job error handler threw');
    }
  }

  private async callListener(fn: () => unknown, context: ShardingContext): Promise<void> {
    try {
      await fn();
    } catch (err) {
      context.log.error({ err }, 'job listener threw; ignored');
    }
  }

  private skipped(request: ExecutionRequest, reason: string): ExecutionStatus {
    const { job, fireTime, item, source } = request;
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'skipped', reason, at: Date.now() });
    return 'skipped';
  }
}
