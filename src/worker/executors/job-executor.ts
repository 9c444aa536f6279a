/**
 * The executor seam: one implementation per job type (SIMPLE, DATAFLOW, SCRIPT, HTTP), chosen by the
 * definition's `type`, all behind {@link JobExecutor}. The item runner around an executor takes the
 * item's lock, builds the ShardingContext, applies the policies (timeout, retry, error handler,
 * listeners) and records the outcome; an executor only runs the item, honours `ctx.signal`, and never
 * touches ZooKeeper or the queues (STYLE.md: as BullMQ keeps its lock behind LockManagerWorkerContext).
 */
import type { ShardingContext } from '../../shared/config/job-definition';
import { ErrorCodes, ShardcronError } from '../../shared/errors';

/** What a run reports beyond "completed", for the execution record. */
export interface ExecutorReport {
  /** DATAFLOW: records processed, and records whose processing failed. */
  processed?: number;
  failed?: number;
  /** SCRIPT: the exit code. */
  exitCode?: number;
  /** SCRIPT: the signal that ended the process, when it did not exit by itself (e.g. `'SIGKILL'`). */
  signal?: string;
  /** HTTP: the status code. */
  httpStatus?: number;
}

/** What an executor may ask of the runner while it runs. */
export interface ExecutorEnvironment {
  /** True once the job is flagged for resharding (a streaming DATAFLOW stops fetching then). */
  reshardingPending(job: string): boolean;
}

/**
 * A failed run with details for the record (an exit code, a status, a stderr or body tail): thrown
 * by executors, reported as `failed` with these fields.
 */
export class ExecutionFailure extends ShardcronError {
  readonly report: ExecutorReport;
  /** The run was stopped for taking too long by a limit of its type (a SCRIPT's `timeoutMs`): recorded as `timeout`, as the job's own `timeoutMs` is. */
  readonly timedOut: boolean;

  constructor(message: string, report: ExecutorReport, details: Record<string, unknown> = {}, options?: { cause?: unknown; timedOut?: boolean }) {
    super(ErrorCodes.EXECUTION_FAILED, message, { ...details, ...report }, options && { cause: options.cause });
    this.name = 'ExecutionFailure';
    this.report = Object.freeze({ ...report });
    this.timedOut = options?.timedOut === true;
  }
}

/** Why `signal` aborted, in words: its reason's message, or `'aborted'`. */
export function abortReason(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason.message;
  return reason === undefined ? 'aborted' : String(reason);
}

/**
 * The failure of a run stopped because `signal` aborted: `<what> stopped: aborted (<reason>)`,
 * with the reason as its cause, so the runner can tell it from the job's own failures by the signal.
 */
export function abortedFailure(what: string, signal: AbortSignal, report: ExecutorReport = {}, details: Record<string, unknown> = {}): ExecutionFailure {
  return new ExecutionFailure(`${what} stopped: aborted (${abortReason(signal)})`, report, { ...details, aborted: true }, { cause: signal.reason });
}

/** One job type's way of running one item. `spec` is the type's part of the definition. */
export interface JobExecutor<Spec> {
  /**
   * Runs the item; resolves with what it reports (or nothing) when it completed, rejects when it
   * failed (an {@link ExecutionFailure} carries details). Must stop promptly once `ctx.signal`
   * aborts (timeout, lost session, shutdown), leaving nothing running behind it.
   */
  run(spec: Spec, ctx: ShardingContext, env: ExecutorEnvironment): Promise<ExecutorReport | void>;
}
