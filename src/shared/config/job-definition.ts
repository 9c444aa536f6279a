/**
 * The public job API: {@link defineJob}, what a handler receives ({@link ShardingContext}) and what a
 * jobs module exports ({@link ResolvedJobDefinition}). A definition is discriminated by `type`
 * (DESIGN.md "Job types contract"): SIMPLE has `execute`, DATAFLOW `fetchData`/`processData`, SCRIPT
 * `script`, HTTP `http`. Validation is that of the stored config (job-config.ts), plus the fields
 * that only live in code: the handlers, a function error handler, listeners.
 */
import { z } from 'zod';
import { ConfigError, ErrorCodes } from '../errors';
import type { Logger } from '../logger';
import type { ExecutionSource } from '../registry/execution-request';
import { toFieldIssues } from '../validation';
import {
  expectedValue,
  invalidJobSubject,
  jobConfigShape,
  JOB_CONFIG_FIELDS,
  rawJobName,
  toJobConfig,
  whenFieldsValid,
  withJobConfigChecks,
  withUnknownFieldsRejected,
  type JobConfig,
  type JobConfigInput,
  type JobType,
} from './job-config';
import { storedErrorHandlerField, type StoredErrorHandler } from './job-policies';
import { dataflowSpecShape, httpSpecSchema, scriptSpecSchema, type FetchDataFunction, type ProcessDataFunction } from './job-type-specs';

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
  /** The attempt this is, from 1 (the job's `retry` policy makes more). */
  readonly attempt: number;
  /**
   * Aborted when the execution must stop: the instance lost its ZooKeeper connection (its items are
   * about to be failed over), it is shutting down past its grace period, or the attempt ran past the
   * job's `timeoutMs`. Pass it to I/O calls.
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
export type ExecutionStatus = 'completed' | 'failed' | 'aborted' | 'skipped' | 'timeout';

/** The outcome given to {@link JobListeners.afterExecute}. */
export interface ExecutionOutcome {
  /**
   * `completed`: it succeeded; `failed`: it threw or rejected (every attempt); `timeout`: its last
   * attempt ran past `timeoutMs`; `aborted`: the instance stopped it; `skipped`: not run.
   */
  readonly status: ExecutionStatus;
  /** What the last attempt threw, for `failed` and `timeout` (and `aborted`, when it threw). */
  readonly error?: unknown;
  /** Wall-clock duration of every attempt and the waits between them, in ms (0 when skipped). */
  readonly durationMs: number;
  /** Attempts made (1 without retries). */
  readonly attempts: number;
}

/** A SIMPLE job's handler: runs one sharding item. Its resolved value is ignored; a rejection is a failure. */
export type ExecuteFunction = (ctx: ShardingContext) => unknown | Promise<unknown>;

/** Built-in error handlers: `'LOG'` logs the error at error level (ElasticJob's default), `'THROW'` also fails the request in BullMQ with it, `'IGNORE'` drops it. */
export type ErrorHandlerName = 'LOG' | 'THROW' | 'IGNORE';

/** A custom error handler, called with what the execution threw. Its own errors are logged, never rethrown. */
export type ErrorHandlerFunction = (error: unknown, ctx: ShardingContext) => void | Promise<void>;

/** A job's error handler: a built-in name, a webhook (`{ webhook: url }`, POSTed a JSON report), or a function. */
export type JobErrorHandler = StoredErrorHandler | ErrorHandlerFunction;

/** A fire of a job, as the once-per-fire listeners see it (docs/listeners.md). */
export interface FireContext {
  /** The job's name. */
  readonly jobName: string;
  /** Nominal fire time (epoch ms); for manual triggers, the trigger time. */
  readonly fireTime: number;
  /** Source of the request whose instance runs the listener (a failed-over item's is `FAILOVER`). */
  readonly source: ExecutionSource;
  /** Items the fire dispatched (disabled items left out). */
  readonly shardingTotalCount: number;
  /** The instance running the listener. */
  readonly instanceId: string;
  /** A pino child logger scoped with `{job, fireTime}`. */
  readonly log: Logger;
}

/** Hooks around executions. A listener's errors are logged, never rethrown. */
export interface JobListeners {
  /** Called before each execution on this worker. */
  beforeExecute?(ctx: ShardingContext): void | Promise<void>;
  /** Called after each execution on this worker ended (or was skipped), with its outcome. */
  afterExecute?(ctx: ShardingContext, outcome: ExecutionOutcome): void | Promise<void>;
  /** Called once per fire, across all items and instances, before its first item starts. */
  beforeFire?(fire: FireContext): void | Promise<void>;
  /** Called once per fire, across all items and instances, after every item ended or was given up. */
  afterFire?(fire: FireContext): void | Promise<void>;
}

/** The settings and hooks every type of job has. */
type CommonDefinition = Omit<JobConfigInput, 'type' | 'script' | 'http' | 'streaming' | 'processConcurrency' | 'errorHandler' | 'fireListeners'> & {
  /** What to do when an execution fails (after its last attempt). Default `'LOG'`. */
  readonly errorHandler?: JobErrorHandler;
  /** Hooks around executions and fires. Default: none. */
  readonly listeners?: JobListeners;
};

/** A SIMPLE job: `execute` runs one item. */
export type SimpleJobDefinition = CommonDefinition & {
  readonly type?: 'SIMPLE';
  readonly execute: ExecuteFunction;
};

/** A DATAFLOW job: `fetchData` gets an item's records, `processData` handles them (once, or until nothing comes when `streaming`). */
export type DataflowJobDefinition<T = unknown> = CommonDefinition & {
  readonly type: 'DATAFLOW';
  readonly fetchData: FetchDataFunction<T>;
  readonly processData: ProcessDataFunction<T>;
  readonly streaming?: boolean;
  readonly processConcurrency?: number;
};

/** A SCRIPT job: a program run per item, without a shell. */
export type ScriptJobDefinition = CommonDefinition & {
  readonly type: 'SCRIPT';
  readonly script: NonNullable<JobConfigInput['script']>;
};

/** An HTTP job: a request made per item. */
export type HttpJobDefinition = CommonDefinition & {
  readonly type: 'HTTP';
  readonly http: NonNullable<JobConfigInput['http']>;
};

/**
 * What {@link defineJob} takes: the stored settings (`name` required, every other field optional
 * with its default) plus the code of the job, by `type`. Unknown fields are refused.
 */
export type JobDefinition = SimpleJobDefinition | DataflowJobDefinition | ScriptJobDefinition | HttpJobDefinition;

/**
 * A validated job definition: every field of {@link JobConfig} with defaults applied, the code fields,
 * and `config`, the part stored in ZooKeeper. Frozen, as are `config` and `listeners`.
 */
export interface ResolvedJobDefinition extends Omit<JobConfig, 'errorHandler'> {
  readonly type: JobType;
  /** SIMPLE: runs one sharding item. */
  readonly execute?: ExecuteFunction;
  /** DATAFLOW: fetches and processes an item's records. */
  readonly fetchData?: FetchDataFunction;
  readonly processData?: ProcessDataFunction;
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

const LISTENER_NAMES = ['beforeExecute', 'afterExecute', 'beforeFire', 'afterFire'] as const;

// z.custom aborts the whole parse on failure unless told otherwise; `abort: false` keeps the
// other fields' checks running, so every problem is reported at once.
const listenersField = z
  .custom<JobListeners>(isObject, { abort: false, error: expectedValue('an object { beforeExecute?(ctx), afterExecute?(ctx, outcome), beforeFire?(fire), afterFire?(fire) }') })
  .superRefine((listeners, ctx) => {
    for (const name of LISTENER_NAMES) {
      const hook = (listeners as Record<string, unknown>)[name];
      if (hook !== undefined && !isFunction(hook)) ctx.addIssue({ code: 'custom', path: [name], message: expectedValue('a function')({ input: hook }) });
    }
    // Only plain objects: a class instance's own fields are its state, not misspelt hooks.
    const proto = Object.getPrototypeOf(listeners) as unknown;
    if (proto !== Object.prototype && proto !== null) return;
    for (const key of Object.keys(listeners).filter((k) => !(LISTENER_NAMES as readonly string[]).includes(k))) {
      ctx.addIssue({ code: 'custom', path: [key], message: `unknown listener; expected ${LISTENER_NAMES.join(', ')}` });
    }
  });

const fn = (what: string) => z.custom<(...args: never[]) => unknown>(isFunction, { abort: false, error: expectedValue(what) }).optional();

/** The fields that only live in code, by the type that has them. */
const CODE_FIELDS: ReadonlyArray<readonly [string, JobType, string]> = [
  ['execute', 'SIMPLE', 'the function that runs one sharding item, (ctx: ShardingContext) => unknown | Promise<unknown>'],
  ['fetchData', 'DATAFLOW', 'the function that fetches an item\'s records, (ctx) => records[] | Promise<records[]>'],
  ['processData', 'DATAFLOW', 'the function that processes records, (ctx, records) => void | Promise<void>'],
];

const definitionShape = {
  ...jobConfigShape,
  // Strict forms of the type specs: a misspelt field in code is refused, not dropped.
  script: scriptSpecSchema.optional(),
  http: httpSpecSchema.optional(),
  // Optional here: each is required for its type only (checked below); streaming and
  // processConcurrency come from the config's shape, without defaults, as the other type fields.
  fetchData: dataflowSpecShape.fetchData.optional(),
  processData: dataflowSpecShape.processData.optional(),
  execute: fn('a function (ctx) => unknown | Promise<unknown>'),
  errorHandler: z
    .union([storedErrorHandlerField, z.custom<(...args: never[]) => unknown>(isFunction)], { error: expectedValue(`'LOG', 'THROW', 'IGNORE', { webhook: url } or a function (error, ctx) => void`) })
    .default('LOG'),
  listeners: listenersField.optional(),
};
// The stored config marks a job with once-per-fire listeners; a definition says so with its listeners.
const DEFINITION_FIELDS = [...Object.keys(definitionShape)].filter((k) => k !== 'fireListeners');

const definitionSchema = withUnknownFieldsRejected(
  withJobConfigChecks(z.looseObject(definitionShape)).superRefine((value, ctx) => {
    const type = (value.type ?? 'SIMPLE') as JobType;
    for (const [field, owner, what] of CODE_FIELDS) {
      const given = (value as Record<string, unknown>)[field] !== undefined;
      if (owner === type && !given) ctx.addIssue({ code: 'custom', path: [field], message: `is required for a ${type} job: ${what}` });
      if (owner !== type && given) ctx.addIssue({ code: 'custom', path: [field], message: `is a ${owner} field; this job is ${type}` });
    }
  }, whenFieldsValid('type', 'execute', 'fetchData', 'processData')),
  DEFINITION_FIELDS,
);

/** Copies the hooks into a frozen object, bound to their owner so class-based listeners keep `this`. */
function freezeListeners(listeners: JobListeners | undefined): Readonly<JobListeners> {
  const out: JobListeners = {};
  for (const name of LISTENER_NAMES) {
    const hook = listeners?.[name] as ((...args: never[]) => unknown) | undefined;
    if (hook) (out as Record<string, unknown>)[name] = hook.bind(listeners);
  }
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
 *   defineJob({ name: 'report', type: 'HTTP', cron: '0 0 * * * ?', http: { url: 'https://reports.example/run', method: 'POST' } }),
 * ];
 */
export function defineJob<T>(definition: SimpleJobDefinition | DataflowJobDefinition<T> | ScriptJobDefinition | HttpJobDefinition): ResolvedJobDefinition {
  const result = definitionSchema.safeParse(definition);
  if (!result.success) {
    const name = rawJobName(definition);
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, invalidJobSubject(name), toFieldIssues(result.error), { job: name });
  }
  const parsed = result.data as Record<string, unknown> & { listeners?: JobListeners; errorHandler: JobErrorHandler };
  const listeners = freezeListeners(parsed.listeners);
  const fireListeners = listeners.beforeFire !== undefined || listeners.afterFire !== undefined;
  const stored = isFunction(parsed.errorHandler) ? undefined : parsed.errorHandler;
  const config = toJobConfig({ ...(parsed as unknown as JobConfig), errorHandler: stored === 'LOG' ? undefined : stored, ...(fireListeners && { fireListeners }) });
  const resolved: ResolvedJobDefinition = Object.freeze({
    ...config,
    ...(parsed.execute !== undefined && { execute: parsed.execute as ExecuteFunction }),
    ...(parsed.fetchData !== undefined && { fetchData: parsed.fetchData as FetchDataFunction }),
    ...(parsed.processData !== undefined && { processData: parsed.processData as ProcessDataFunction }),
    errorHandler: parsed.errorHandler,
    listeners,
    config,
  });
  defined.add(resolved);
  return resolved;
}

/** True for the values {@link defineJob} returned (in this copy of the module): lets a jobs-module loader check its default export. */
export function isResolvedJobDefinition(value: unknown): value is ResolvedJobDefinition {
  return typeof value === 'object' && value !== null && defined.has(value);
}

/**
 * The definition of a job that is pure data (SCRIPT, HTTP), made from its stored config: what a
 * generic worker runs (SHARDCRON_WORKER_GENERIC) for an API-defined job it has no code for.
 */
export function definitionFromConfig(config: JobConfig): ResolvedJobDefinition {
  if (config.type !== 'SCRIPT' && config.type !== 'HTTP') {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, invalidJobSubject(config.name), [{ field: 'type', message: `${config.type} jobs need code; only SCRIPT and HTTP jobs run from their config alone` }]);
  }
  return Object.freeze({ ...config, errorHandler: config.errorHandler ?? 'LOG', listeners: Object.freeze({}), config });
}

export { JOB_CONFIG_FIELDS };
