/**
 * The public job API: {@link defineJob}, what a handler receives ({@link ShardingContext}) and what a
 * jobs module exports ({@link ResolvedJobDefinition}). Validation is that of the stored config
 * (src/shared/job-config.ts), plus the fields that only live in code: execute, errorHandler, listeners.
 */
import { z } from 'zod';
import { ConfigError, ErrorCodes } from '../errors';
import type { ExecutionSource } from '../registry/execution-request';
import {
  expectedValue,
  invalidJobSubject,
  jobConfigShape,
  rawJobName,
  toJobConfig,
  whenFieldsValid,
  withJobConfigChecks,
  withUnknownFieldsRejected,
  type JobConfig,
  type JobConfigInput,
} from './job-config';
import type { Logger } from '../logger';
import { toFieldIssues } from '../validation';

/** What a handler receives for one execution: one item of one fire of one job, on one instance. */
export interface ShardingContext {
  /** The job's name. */
  readonly jobName: string;
  /** Identifies this execution: `{jobName}@-@{fireTime}@-@{shardingItem}@-@{instanceId}` (see {@link formatTaskId}). */
  readonly taskId: string;
  /** The job's shardingTotalCount when the fire was dispatched. */
  readonly shardingTotalCount: number;
  /** The job's jobParameter (`''` when none). */
  readonly jobParameter: string;
  /** The sharding item this execution runs, 0..shardingTotalCount-1. */
  readonly shardingItem: number;
  /** This item's value from shardingItemParameters, `''` when it has none. */
  readonly shardingParameter: string;
  /** Nominal fire time (epoch ms) of the fire this execution belongs to; for manual triggers, the trigger time. */
  readonly fireTime: number;
  /** Why this execution runs: a scheduled fire, a misfire re-run, a failover from a lost instance, or a manual trigger. */
  readonly source: ExecutionSource;
  /** The worker instance running it (`{ip}@-@{pid}` by default). */
  readonly instanceId: string;
  /**
   * Aborted when the execution must stop: the instance lost its ZooKeeper connection (its items are
   * about to be failed over), or it is shutting down past its grace period. Pass it to I/O calls.
   */
  readonly signal: AbortSignal;
  /**
   * Throws ShardcronError NOT_OWNER if this execution may no longer be ours (session lost, item moved
   * to another instance). Call it right before committing a side effect that must not happen twice.
   */
  assertOwnership(): void;
  /** A pino child logger scoped with `{job, item, fireTime, instanceId}`. */
  readonly log: Logger;
}

/** How an execution ended, as reported to `afterExecute`. */
export type ExecutionStatus = 'completed' | 'failed' | 'aborted' | 'skipped';

/** The outcome given to {@link JobListeners.afterExecute}. */
export interface ExecutionOutcome {
  /** `completed`: execute resolved; `failed`: it threw or rejected; `aborted`: its signal fired; `skipped`: not run (e.g. already running elsewhere). */
  readonly status: ExecutionStatus;
  /** What execute threw, for `failed` (and `aborted`, when it threw). */
  readonly error?: unknown;
  /** Wall-clock duration of execute, in ms (0 when skipped). */
  readonly durationMs: number;
}

/** A SIMPLE job's handler: runs one sharding item. Its resolved value is ignored; a rejection is a failure. */
export type ExecuteFunction = (ctx: ShardingContext) => unknown | Promise<unknown>;

/** Built-in error handlers: `'LOG'` logs the error at error level (ElasticJob's default), `'IGNORE'` drops it. */
export type ErrorHandlerName = 'LOG' | 'IGNORE';

/** A custom error handler, called with what execute threw. Its own errors are logged, never rethrown. */
export type ErrorHandlerFunction = (error: unknown, ctx: ShardingContext) => void | Promise<void>;

/** A job's error handler: a built-in name or a function. */
export type JobErrorHandler = ErrorHandlerName | ErrorHandlerFunction;

/** Hooks around every execution of the job on this worker. A listener's errors are logged, never rethrown. */
export interface JobListeners {
  /** Called before execute. */
  beforeExecute?(ctx: ShardingContext): void | Promise<void>;
  /** Called after execute ended (or was skipped), with its outcome. */
  afterExecute?(ctx: ShardingContext, outcome: ExecutionOutcome): void | Promise<void>;
}

/**
 * What {@link defineJob} takes: the stored settings ({@link JobConfigInput}: `name` required, every
 * other field optional with its default) plus the code of the job. Unknown fields are refused.
 */
export interface JobDefinition extends JobConfigInput {
  /** Runs one sharding item. Required (SIMPLE jobs, the only type of this version). */
  readonly execute: ExecuteFunction;
  /** What to do when execute throws or rejects. Default `'LOG'`. */
  readonly errorHandler?: JobErrorHandler;
  /** Hooks around every execution. Default: none. */
  readonly listeners?: JobListeners;
}

/**
 * A validated job definition: every field of {@link JobConfig} with defaults applied, the code fields,
 * and `config`, the part stored in ZooKeeper. Frozen, as are `config` and `listeners`.
 */
export interface ResolvedJobDefinition extends JobConfig {
  /** Runs one sharding item. */
  readonly execute: ExecuteFunction;
  /** The error handler; `'LOG'` when none was given. */
  readonly errorHandler: JobErrorHandler;
  /** The listeners given (bound to the object they came from); `{}` when none. */
  readonly listeners: Readonly<JobListeners>;
  /** The serializable part, as written to `/{job}/config`. */
  readonly config: JobConfig;
}

/** Separator of the parts of a {@link ShardingContext.taskId}, as in ElasticJob. */
export const TASK_ID_SEPARATOR = '@-@';

/** Builds a {@link ShardingContext.taskId}: `{jobName}@-@{fireTime}@-@{shardingItem}@-@{instanceId}`. */
export function formatTaskId(parts: Pick<ShardingContext, 'jobName' | 'fireTime' | 'shardingItem' | 'instanceId'>): string {
  // A template, not an array join: it runs once per execution.
  return `${parts.jobName}${TASK_ID_SEPARATOR}${parts.fireTime}${TASK_ID_SEPARATOR}${parts.shardingItem}${TASK_ID_SEPARATOR}${parts.instanceId}`;
}

const isFunction = (value: unknown): value is (...args: never[]) => unknown => typeof value === 'function';
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const LISTENER_NAMES = ['beforeExecute', 'afterExecute'] as const;

// z.custom aborts the whole parse on failure unless told otherwise; `abort: false` keeps the
// other fields' checks running, so every problem is reported at once.
const listenersField = z
  .custom<JobListeners>(isObject, { abort: false, error: expectedValue('an object { beforeExecute?(ctx), afterExecute?(ctx, outcome) }') })
  .superRefine((listeners, ctx) => {
    for (const name of LISTENER_NAMES) {
      const hook = (listeners as Record<string, unknown>)[name];
      if (hook !== undefined && !isFunction(hook)) ctx.addIssue({ code: 'custom', path: [name], message: expectedValue('a function')({ input: hook }) });
    }
    // Only plain objects: a class instance's own fields are its state, not misspelt hooks.
    const proto = Object.getPrototypeOf(listeners) as unknown;
    if (proto !== Object.prototype && proto !== null) return;
    for (const key of Object.keys(listeners).filter((k) => !(LISTENER_NAMES as readonly string[]).includes(k))) {
      ctx.addIssue({ code: 'custom', path: [key], message: `unknown listener; expected ${LISTENER_NAMES.join(' or ')}` });
    }
  });

const definitionShape = {
  ...jobConfigShape,
  // Optional here: it is required for SIMPLE jobs only (checked below), so an unsupported type is reported alone.
  execute: z.custom<ExecuteFunction>(isFunction, { abort: false, error: expectedValue('a function (ctx) => unknown | Promise<unknown>') }).optional(),
  errorHandler: z
    .custom<JobErrorHandler>((v) => v === 'LOG' || v === 'IGNORE' || isFunction(v), {
      abort: false,
      error: expectedValue(`'LOG', 'IGNORE' or a function (error, ctx) => void`),
    })
    .default('LOG'),
  listeners: listenersField.optional(),
};

const definitionSchema = withUnknownFieldsRejected(
  withJobConfigChecks(z.looseObject(definitionShape)).superRefine((value, ctx) => {
    if (value.type === 'SIMPLE' && value.execute === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['execute'],
        message: 'is required for a SIMPLE job: the function that runs one sharding item, (ctx: ShardingContext) => unknown | Promise<unknown>',
      });
    }
  }, whenFieldsValid('type', 'execute')),
  Object.keys(definitionShape),
);

/** Copies the hooks into a frozen object, bound to their owner so class-based listeners keep `this`. */
function freezeListeners(listeners: JobListeners | undefined): Readonly<JobListeners> {
  const out: JobListeners = {};
  if (listeners?.beforeExecute) out.beforeExecute = listeners.beforeExecute.bind(listeners);
  if (listeners?.afterExecute) out.afterExecute = listeners.afterExecute.bind(listeners);
  return Object.freeze(out);
}

const defined = new WeakSet<object>();

/**
 * Validates a job definition at once, so a bad job fails when its module is imported, and returns it
 * frozen with defaults applied. Throws a {@link ConfigError} INVALID_CONFIG whose message starts with
 * `Invalid job "<name>"` and lists every bad or unknown field. A custom shardingStrategy must be
 * registered (registerShardingStrategy) before this call.
 *
 * @example
 * export default [
 *   defineJob({ name: 'billing', cron: '0/5 * * * * ?', shardingTotalCount: 3, async execute(ctx) { ... } }),
 * ];
 */
export function defineJob(definition: JobDefinition): ResolvedJobDefinition {
  const result = definitionSchema.safeParse(definition);
  if (!result.success) {
    const name = rawJobName(definition);
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, invalidJobSubject(name), toFieldIssues(result.error), { job: name });
  }
  const parsed = result.data;
  const config = toJobConfig(parsed as unknown as JobConfig);
  const resolved: ResolvedJobDefinition = Object.freeze({
    ...config,
    execute: parsed.execute as ExecuteFunction,
    errorHandler: parsed.errorHandler,
    listeners: freezeListeners(parsed.listeners),
    config,
  });
  defined.add(resolved);
  return resolved;
}

/** True for the values {@link defineJob} returned (in this copy of the module): lets a jobs-module loader check its default export. */
export function isResolvedJobDefinition(value: unknown): value is ResolvedJobDefinition {
  return typeof value === 'object' && value !== null && defined.has(value);
}
