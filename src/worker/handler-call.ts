/**
 * One call of a job's code for one item: a place among the handlers running at once, the
 * ShardingContext, `beforeExecute`, the executor of the job's type with the job's policies (a
 * timeout per attempt, attempts with back-off, all under the item's one lock), the error handler;
 * then, once the item runner has released the item, the finish event, the execution record and
 * `afterExecute`. Nothing here touches the item lock, ZooKeeper or the queues.
 */
import { onAbort, sleepUnless } from '../shared/abort-listeners';
import type { Semaphore } from '../shared/concurrency';
import type { JobConfig } from '../shared/config/job-config';
import { formatTaskId, type ExecutionOutcome, type ExecutionStatus, type ResolvedJobDefinition, type ShardingContext } from '../shared/config/job-definition';
import { backoffBefore } from '../shared/config/job-policies';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { recordError, type ExecutionRecord } from '../shared/registry/execution-record';
import type { ExecutionRequest, ExecutionSource } from '../shared/registry/execution-request';
import { parseShardingItemParameters } from '../shared/sharding/sharding-item-parameters';
import type { ErrorWebhooks } from './error-webhook';
import { runJobCode } from './job-code';
import type { ExecutorEnvironment, ExecutorReport } from './executors/job-executor';
import { ExecutionFailure } from './executors/job-executor';

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
   * `beforeExecute` listener, the attempts and the waits between them, and the error handler; not
   * the lock's round trips nor `afterExecute`, which runs once the release answered.
   */
  handlers: Semaphore;
  record(event: ExecutionEvent): void;
  /** Every execution's record, once it ended (the history's input). */
  onRecord?(record: ExecutionRecord): void;
  /** What executors may ask (a pending reshard); by default nothing is ever pending. */
  environment?: ExecutorEnvironment;
  /** Where `{ webhook }` error handlers post. */
  webhooks?: ErrorWebhooks;
}

/** A call that ran: its outcome before the release, and what {@link HandlerCalls.finish} needs. */
export interface HandlerRun {
  readonly outcome: ExecutionOutcome;
  readonly started: number;
  readonly context: ItemContext;
  readonly report?: ExecutorReport;
}

const NEVER_RESHARDING: ExecutorEnvironment = Object.freeze({ reshardingPending: () => false });
/** How long after its timeout a run still going is reported as ignoring its signal. */
const TIMEOUT_WARN_AFTER_MS = 5_000;

/** Why a run whose lock was taken did not start: its session was no longer known to be ours. */
export const NOT_OWNED_AT_START = 'no contact with ZooKeeper for too long before the handler started; the item may be running elsewhere';

/** The error a run's timeout aborts its signal with. */
class AttemptTimeout extends ShardcronError {
  constructor(job: string, item: number, timeoutMs: number) {
    super(ErrorCodes.TIMEOUT, `job ${job} item ${item} ran past its timeoutMs (${timeoutMs} ms)`, { job, item, timeoutMs });
    this.name = 'AttemptTimeout';
  }
}

/**
 * What the call does with its ItemContext beyond what job code may: set by the class's static block,
 * so that none of it is a member of the object job code gets.
 */
let execution: {
  logger(context: ItemContext): Logger;
  timeOut(context: ItemContext, timeout: AttemptTimeout): void;
  timedOut(context: ItemContext): AttemptTimeout | undefined;
  endAttempt(context: ItemContext): void;
  nextAttempt(context: ItemContext): void;
};

/**
 * The ShardingContext of one execution. Its data are plain fields; `attempt`, `signal`, `log` and
 * `assertOwnership` are accessors on the prototype over the execution's private state, made when
 * first asked for. An object literal with accessors and closures made six functions, their
 * accessor pairs and a closure context per execution, all kept until the run's finish, after the
 * release's round trip: long enough, at thousands of items a second, to leave the young generation
 * and fill the old one. What the call itself does with it goes through `execution`, not through members job code could reach.
 */
class ItemContext implements ShardingContext {
  readonly jobName: string;
  readonly taskId: string;
  readonly shardingTotalCount: number;
  readonly jobParameter: string;
  readonly shardingItem: number;
  readonly shardingParameter: string;
  readonly fireTime: number;
  readonly source: ExecutionSource;
  readonly instanceId: string;
  #attempt = 1;
  #controller: AbortController | undefined = undefined;
  #stopListening: (() => void) | undefined = undefined;
  #timedOut: AttemptTimeout | undefined = undefined;
  #log: Logger | undefined = undefined;
  #assert: (() => void) | undefined = undefined;
  readonly #calls: HandlerCallContext;
  readonly #stopAll: AbortSignal;
  readonly #sessionId: string;

  constructor(calls: HandlerCallContext, request: ExecutionRequest, config: JobConfig, taskId: string, shardingParameter: string, stopAll: AbortSignal, sessionId: string) {
    this.jobName = request.job;
    this.taskId = taskId;
    this.shardingTotalCount = config.shardingTotalCount;
    this.jobParameter = config.jobParameter;
    this.shardingItem = request.item;
    this.shardingParameter = shardingParameter;
    this.fireTime = request.fireTime;
    this.source = request.source;
    this.instanceId = calls.instanceId;
    this.#calls = calls;
    this.#stopAll = stopAll;
    this.#sessionId = sessionId;
  }

  get attempt(): number {
    return this.#attempt;
  }

  get signal(): AbortSignal {
    return this.#attemptSignal().signal;
  }

  get log(): Logger {
    return this.#logger();
  }

  /** A function of its own (made once), so that it also works taken off the context. */
  get assertOwnership(): () => void {
    return (this.#assert ??= () => {
      if (this.#stopAll.aborted || !this.#calls.owns(this.#sessionId)) {
        const { jobName: job, shardingItem: item, fireTime } = this;
        throw new ShardcronError(ErrorCodes.NOT_OWNER, `execution of ${job} item ${item} (fire ${fireTime}) may no longer be ours`, { job, item, fireTime });
      }
    });
  }

  /** The execution's logger: a pino child, made when first asked for. */
  #logger(): Logger {
    return (this.#log ??= this.#calls.log.child({ job: this.jobName, item: this.shardingItem, fireTime: this.fireTime }));
  }

  /** The attempt timed out: its signal aborts with `timeout`. */
  #timeOut(timeout: AttemptTimeout): void {
    this.#timedOut = timeout;
    this.#attemptSignal().abort(timeout);
  }

  /** The attempt ended: its signal (if one was made) stops listening to the worker's. */
  #endAttempt(): void {
    this.#stopListening?.();
    this.#stopListening = undefined;
    this.#controller = undefined;
  }

  /** The next attempt begins. */
  #nextAttempt(): void {
    this.#attempt += 1;
    this.#timedOut = undefined;
  }

  /**
   * The attempt's controller, made when first asked for: an AbortController with its listener on the
   * worker's signal costs more than a no-op handler.
   */
  #attemptSignal(): AbortController {
    if (!this.#controller) {
      const made = new AbortController();
      this.#controller = made;
      const stopAll = this.#stopAll;
      if (this.#timedOut) made.abort(this.#timedOut);
      else if (stopAll.aborted) made.abort(stopAll.reason);
      else this.#stopListening = onAbort(stopAll, () => made.abort(stopAll.reason));
    }
    return this.#controller;
  }

  static {
    execution = {
      logger: (context) => context.#logger(),
      timeOut: (context, timeout) => context.#timeOut(timeout),
      timedOut: (context) => context.#timedOut,
      endAttempt: (context) => context.#endAttempt(),
      nextAttempt: (context) => context.#nextAttempt(),
    };
  }
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
      this.recordEnd(request, { status: 'aborted', reason: 'worker stopping before the handler started', attempts: 0, startedAt: Date.now() });
      return undefined;
    }
    // The lock's own check of the session ran when the lock was taken. A process frozen since then
    // (a long GC pause, SIGSTOP), or one that waited for this place, may have lost the item
    // meanwhile, with the watchdog not yet run to say so: look again, right before the handler.
    if (!this.ctx.owns(sessionId)) {
      freePlace();
      this.recordEnd(request, { status: 'aborted', reason: NOT_OWNED_AT_START, attempts: 0, startedAt: Date.now() });
      return undefined;
    }
    const context = new ItemContext(this.ctx, request, config, taskId, shardingParameter, stopAll, sessionId);
    const { beforeExecute } = definition.listeners;
    const started = Date.now();
    this.ctx.record({ event: 'start', job, fireTime, item, instanceId: this.ctx.instanceId, source, at: started });
    if (beforeExecute) await callListener(() => beforeExecute(context), () => execution.logger(context));
    const attempts = config.retry?.attempts ?? 1;
    let outcome: ExecutionOutcome;
    let report: ExecutorReport | undefined;
    try {
      for (;;) {
        let timer: NodeJS.Timeout | undefined;
        if (config.timeoutMs !== undefined) {
          const timeoutMs = config.timeoutMs;
          timer = setTimeout(() => {
            execution.timeOut(context, new AttemptTimeout(job, item, timeoutMs));
            // Code that ignores its signal cannot be stopped from here: the item stays locked until
            // it returns (never two runs of an item at once), and operators are told why.
            timer = setTimeout(() => {
              execution.logger(context).warn({ timeoutMs, overMs: TIMEOUT_WARN_AFTER_MS }, 'job code ignores its abort signal after its timeout; the item stays locked until it returns');
            }, TIMEOUT_WARN_AFTER_MS);
            timer.unref();
          }, timeoutMs);
        }
        let error: unknown;
        let failed = false;
        try {
          report = (await runJobCode(definition, config, context, this.ctx.environment ?? NEVER_RESHARDING)) ?? undefined;
        } catch (err) {
          failed = true;
          error = err;
          if (err instanceof ExecutionFailure) report = err.report;
        } finally {
          clearTimeout(timer);
          execution.endAttempt(context);
        }
        const { attempt } = context;
        const timedOut = execution.timedOut(context);
        const durationMs = Date.now() - started;
        // Code that ended after its timeout overran, however it ended.
        if (timedOut && !failed) {
          failed = true;
          error = timedOut;
        }
        if (!failed) {
          // Finishing after our ownership ended is not a completion: the item may already run elsewhere.
          const stillOurs = !stopAll.aborted && this.ctx.owns(sessionId);
          outcome = { status: stillOurs ? 'completed' : 'aborted', durationMs, attempts: attempt };
          break;
        }
        const status: ExecutionStatus = stopAll.aborted ? 'aborted' : timedOut || (error instanceof ExecutionFailure && error.timedOut) ? 'timeout' : 'failed';
        outcome = { status, error: timedOut ?? error, durationMs, attempts: attempt };
        if (status === 'aborted' || attempt >= attempts) break;
        // Another attempt, on the same lock, after its back-off (a stop cuts the wait short).
        const wait = backoffBefore(config.retry!, attempt + 1);
        execution.logger(context).warn({ err: error, attempt, attempts, retryInMs: wait }, 'job execution failed; retrying');
        if (!(await sleepUnless(wait, stopAll))) {
          outcome = { status: 'aborted', error, durationMs: Date.now() - started, attempts: attempt };
          break;
        }
        execution.nextAttempt(context);
      }
      if (outcome.status === 'failed' || outcome.status === 'timeout') await this.handleError(definition, config, outcome, context, request, started);
    } finally {
      // The code is over: its place is free while the release makes its round trip.
      freePlace();
    }
    return { outcome, started, context, ...(report && { report }) };
  }

  /**
   * Reports a run once its release is over: `status` is the outcome as settled by the release (a
   * completion that could not be recorded is `aborted`, with `reason`). The event's `at` is when the
   * code ended, not when the release answered: the run stopped then. A promise only while
   * `afterExecute` runs (most jobs have none, and need no promise per run).
   */
  finish(definition: ResolvedJobDefinition, request: ExecutionRequest, run: HandlerRun, status: ExecutionStatus, reason?: string): Promise<void> | undefined {
    const outcome = status === run.outcome.status ? run.outcome : { ...run.outcome, status };
    this.recordEnd(request, { status, reason, attempts: outcome.attempts, startedAt: run.started, durationMs: outcome.durationMs, error: outcome.error, report: run.report });
    const { afterExecute } = definition.listeners;
    return afterExecute ? callListener(() => afterExecute(run.context, outcome), () => execution.logger(run.context)) : undefined;
  }

  /** Records a request that did not run, and why. */
  skipped(request: ExecutionRequest, reason: string): ExecutionStatus {
    this.recordEnd(request, { status: 'skipped', reason, attempts: 0, startedAt: Date.now() });
    return 'skipped';
  }

  /** The finish event and the execution record of an execution that ended. */
  private recordEnd(
    request: ExecutionRequest,
    end: ExecutionEnd,
  ): void {
    const { job, fireTime, item, source } = request;
    const durationMs = end.durationMs ?? 0;
    const at = end.startedAt + durationMs;
    this.ctx.record({ event: 'finish', job, fireTime, item, instanceId: this.ctx.instanceId, source, status: end.status, reason: end.reason, at });
    if (this.ctx.onRecord) this.ctx.onRecord(executionRecord(request, this.ctx.instanceId, end));
  }

  /** The item's `shardingItemParameters` entry, parsed once per config. */
  private itemParameter(config: JobConfig, item: number): string {
    let byItem = this.parameters.get(config);
    if (!byItem) this.parameters.set(config, (byItem = parseShardingItemParameters(config.shardingItemParameters)));
    return byItem[item] ?? '';
  }

  /** The job's error handler, once per execution, after its last attempt. */
  private async handleError(
    definition: ResolvedJobDefinition,
    config: JobConfig,
    outcome: ExecutionOutcome,
    context: ItemContext,
    request: ExecutionRequest,
    started: number,
  ): Promise<void> {
    const handler = definition.errorHandler;
    const error = outcome.error;
    if (handler === 'IGNORE') return;
    if (handler === 'LOG' || handler === 'THROW') {
      execution.logger(context).error({ err: error, attempts: outcome.attempts, status: outcome.status }, 'job execution failed');
      return;
    }
    if (typeof handler === 'object') {
      execution.logger(context).error({ err: error, attempts: outcome.attempts, status: outcome.status }, 'job execution failed; reporting it to the webhook');
      const status = outcome.status === 'timeout' ? 'timeout' : 'failed';
      const record = executionRecord(request, this.ctx.instanceId, { status, attempts: outcome.attempts, startedAt: started, durationMs: outcome.durationMs, error });
      this.ctx.webhooks?.send(handler.webhook, { event: 'execution:failed', record, jobParameter: config.jobParameter, shardingParameter: context.shardingParameter }, handler.timeoutMs);
      return;
    }
    try {
      await handler(error, context);
    } catch (err) {
      execution.logger(context).error({ err, original: error }, 'the job error handler threw');
    }
  }
}


/** How an execution ended, as {@link executionRecord} takes it. */
interface ExecutionEnd {
  status: ExecutionStatus;
  reason?: string;
  attempts: number;
  startedAt: number;
  durationMs?: number;
  error?: unknown;
  report?: ExecutorReport;
}

/**
 * The ExecutionRecord of `request`'s execution on `instanceId` (the history's and the webhook's).
 * Built field by field, the optional ones only when present: one per item run, on the hot path
 * (conditional spreads made a temporary object each).
 */
function executionRecord(request: ExecutionRequest, instanceId: string, end: ExecutionEnd): ExecutionRecord {
  const durationMs = end.durationMs ?? 0;
  const record: ExecutionRecord = {
    job: request.job,
    item: request.item,
    fireTime: request.fireTime,
    source: request.source,
    instanceId,
    status: end.status,
    attempts: end.attempts,
    startedAt: end.startedAt,
    finishedAt: end.startedAt + durationMs,
    durationMs,
  };
  if (end.error !== undefined && end.status !== 'completed') record.error = recordError(end.error);
  if (end.reason !== undefined) record.reason = end.reason;
  const report = end.report;
  if (report) {
    if (report.processed !== undefined) record.processed = report.processed;
    if (report.failed !== undefined) record.failed = report.failed;
    if (report.exitCode !== undefined) record.exitCode = report.exitCode;
    if (report.httpStatus !== undefined) record.httpStatus = report.httpStatus;
  }
  return record;
}

async function callListener(fn: () => unknown, log: () => Logger): Promise<void> {
  try {
    await fn();
  } catch (err) {
    log().error({ err }, 'job listener threw; ignored');
  }
}
