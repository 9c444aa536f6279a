/**
 * One call of a job's code for one item: a place among the handlers running at once, the
 * ShardingContext, `beforeExecute`, the executor of the job's type, the error handler; then, once
 * the item runner has released the item, the finish record and `afterExecute`. Nothing here touches
 * the item lock, ZooKeeper or the queues.
 */
import { onAbort } from '../shared/abort-listeners';
import type { Semaphore } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/config/job-definition';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import { parseShardingItemParameters } from '../shared/sharding/sharding-item-parameters';

/** One line of the execution log: what ran where, for which fire, and how it ended. */
export interface ExecutionEvent {
  event: 'start' | 'finish';
  job: string;
  fireTime: number;
  item: number;
  instanceId: string;
  source: ExecutionSource;
  /** On `finish`: how it ended; `skipped` executions, and those stopped before their handler started, have no `start`. */
  status?: ExecutionStatus;
  reason?: string;
  at: number;
}

/** What a call needs of the worker. */
export interface HandlerCallContext {
  instanceId: string;
  log: Logger;
  /** False once the session this execution started under is gone or suspended. */
  owns(sessionId: string): boolean;
  /** The signal aborted when every execution must stop (session lost, forced shutdown). */
  abortSignal(): AbortSignal;
  /**
   * The places of the handlers running at once (the instance's concurrency). A place covers the
   * `beforeExecute` listener, the handler and its error handler, not the lock's round trips nor the
   * `afterExecute` listener, which runs once the release answered.
   */
  handlers: Semaphore;
  record(event: ExecutionEvent): void;
}

/** A call that ran: its outcome before the release, and what {@link HandlerCalls.finish} needs. */
export interface HandlerRun {
  readonly outcome: ExecutionOutcome;
  readonly started: number;
  readonly context: ShardingContext;
  readonly logger: () => Logger;
}

/** Calls jobs' code for items. */
export class HandlerCalls {
  /** Each config's `shardingItemParameters`, parsed by item (a config object is replaced, never changed). */
  private readonly parameters = new WeakMap<JobConfig, Record<number, string>>();

  constructor(private readonly ctx: HandlerCallContext) {}

  /**
   * Runs the item's code on the session `sessionId` holds its lock on (the execution is ours only
   * while it lives). Undefined when the worker stopped before a place was free: nothing ran, and
   * that is recorded here.
   */
  async call(definition: ResolvedJobDefinition, config: JobConfig, request: ExecutionRequest, sessionId: string): Promise<HandlerRun | undefined> {
    const { job, item, fireTime, source } = request;
    const stopAll = this.ctx.abortSignal();
    // Whatever may throw comes before the place is taken (a place taken is given back in `finally`).
    const taskId = formatTaskId({ jobName: job, fireTime, shardingItem: item, instanceId: this.ctx.instanceId });
    const shardingParameter = this.itemParameter(config, item);
    // A place among the handlers running at once. A request waits for one holding its lock; one
    // stopped meanwhile did not run and goes back to the queue, where it runs later, here or elsewhere.
    let freePlace = stopAll.aborted ? undefined : this.ctx.handlers.tryAcquire();
    try {
      freePlace ??= await this.ctx.handlers.acquire(stopAll);
    } catch {
      this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'aborted', reason: 'worker stopping before the handler started', at: Date.now() });
      return undefined;
    }
    // The handler's signal and logger are made when it first asks for them: an AbortController
    // with its listener on the worker's signal, and a pino child, cost more than a no-op handler.
    let controller: AbortController | undefined;
    let stopListening: (() => void) | undefined;
    let log: Logger | undefined;
    const logger = () => (log ??= this.ctx.log.child({ job, item, fireTime }));
    const context: ShardingContext = {
      jobName: job,
      taskId,
      shardingTotalCount: config.shardingTotalCount,
      jobParameter: config.jobParameter,
      shardingItem: item,
      shardingParameter,
      fireTime,
      source,
      instanceId: this.ctx.instanceId,
      get signal() {
        if (!controller) {
          controller = new AbortController();
          if (stopAll.aborted) controller.abort(stopAll.reason);
          else stopListening = onAbort(stopAll, () => controller!.abort(stopAll.reason));
        }
        return controller.signal;
      },
      assertOwnership: () => {
        if (stopAll.aborted || !this.ctx.owns(sessionId)) {
          throw new ShardcronError(ErrorCodes.NOT_OWNER, `execution of ${job} item ${item} (fire ${fireTime}) may no longer be ours`, { job, item, fireTime });
        }
      },
      get log() {
        return logger();
      },
    };
    const { beforeExecute } = definition.listeners;
    const started = Date.now();
    this.ctx.record({ event: 'start', job, fireTime, item, instanceId: this.ctx.instanceId, source, at: started });
    if (beforeExecute) await callListener(() => beforeExecute(context), logger);
    let outcome: ExecutionOutcome;
    try {
      await definition.execute(context);
      // Finishing after our ownership ended is not a completion: the item may already run elsewhere.
      const stillOurs = !stopAll.aborted && this.ctx.owns(sessionId);
      outcome = { status: stillOurs ? 'completed' : 'aborted', durationMs: Date.now() - started };
    } catch (error) {
      outcome = { status: stopAll.aborted ? 'aborted' : 'failed', error, durationMs: Date.now() - started };
      await handleError(definition, error, context, logger);
    } finally {
      stopListening?.();
      // The handler is over: its place is free while the release makes its round trip.
      freePlace();
    }
    return { outcome, started, context, logger };
  }

  /**
   * Reports a run once its release is over: `status` is the outcome as settled by the release (a
   * completion that could not be recorded is `aborted`, with `reason`). The record's `at` is when
   * the handler ended, not when the release answered: the run stopped then.
   */
  async finish(definition: ResolvedJobDefinition, request: ExecutionRequest, run: HandlerRun, status: ExecutionStatus, reason?: string): Promise<void> {
    const { job, item, fireTime, source } = request;
    const outcome = status === run.outcome.status ? run.outcome : { ...run.outcome, status };
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status, reason, at: run.started + outcome.durationMs });
    const { afterExecute } = definition.listeners;
    if (afterExecute) await callListener(() => afterExecute(run.context, outcome), run.logger);
  }

  /** Records a request that did not run, and why. */
  skipped(request: ExecutionRequest, reason: string): ExecutionStatus {
    const { job, fireTime, item, source } = request;
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: 'skipped', reason, at: Date.now() });
    return 'skipped';
  }

  /** The item's `shardingItemParameters` entry, parsed once per config. */
  private itemParameter(config: JobConfig, item: number): string {
    let byItem = this.parameters.get(config);
    if (!byItem) this.parameters.set(config, (byItem = parseShardingItemParameters(config.shardingItemParameters)));
    return byItem[item] ?? '';
  }
}

async function handleError(definition: ResolvedJobDefinition, error: unknown, context: ShardingContext, log: () => Logger): Promise<void> {
  const handler = definition.errorHandler;
  if (handler === 'IGNORE') return;
  if (handler === 'LOG') {
    log().error({ err: error }, 'job execution failed');
    return;
  }
  try {
    await handler(error, context);
  } catch (err) {
    log().error({ err, original: error }, 'the job error handler threw');
  }
}

async function callListener(fn: () => unknown, log: () => Logger): Promise<void> {
  try {
    await fn();
  } catch (err) {
    log().error({ err }, 'job listener threw; ignored');
  }
}
