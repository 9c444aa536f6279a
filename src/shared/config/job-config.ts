/**
 * The stored job config: the serializable part of a job definition, kept as JSON at `/{job}/config`.
 *
 * Every rule about a job's settings lives here, once: `defineJob` (src/shared/config/job-definition.ts),
 * {@link parseJobConfig} (API bodies) and {@link jobConfigCodec} (ZooKeeper reads) all validate with
 * the same field schemas and the same cross-field check, so a config that `defineJob` accepts decodes,
 * and a hand-edited node is refused with the same messages a user would see at import time.
 *
 * Decisions (ElasticJob-Lite 3.x names and defaults unless noted):
 * - Unknown fields in a stored config are ignored (dropped): a newer shardcron may have written
 *   them, and an older leader must keep scheduling the job. `defineJob` rejects them (typo protection).
 * - shardingItemParameters keys >= shardingTotalCount are accepted and ignored, as in ElasticJob:
 *   changing the total at run time (API, console) must not turn a stored config invalid.
 * - A custom shardingStrategy must be registered before a config naming it is parsed or decoded:
 *   a process that cannot run the strategy must not schedule the job with another one.
 * - Decoding errors are CORRUPT_DATA (like every other ZooKeeper read), naming the job, the path and
 *   every bad field; `defineJob` and {@link parseJobConfig} throw INVALID_CONFIG.
 */
import { z } from 'zod';
import { jsonCodec, type JsonCodec } from '../codec';
import { isValidTimeZone, validateCron } from '../cron/cron';
import { ConfigError, ErrorCodes, ShardcronError, type FieldIssue } from '../errors';
import { intern } from '../intern';
import { isValidJobName } from '../registry/registry-paths';
import { toFieldIssues } from '../validation';
import {
  booleanField,
  cronField,
  expectedValue,
  integerField,
  isRecord,
  itemParametersField,
  MAX_SHARDING_TOTAL_COUNT,
  nameField,
  quote,
  strategyField,
  textField,
  timeZoneField,
  typeField,
  whenFieldsValid,
  withUnknownFieldsRejected,
  type JobType,
} from './job-config-fields';
import { retryField, storedErrorHandlerField, timeoutField, type RetryPolicy, type RetryPolicyInput, type StoredErrorHandler } from './job-policies';
import {
  httpSpecSchema,
  httpSpecShape,
  MAX_PROCESS_CONCURRENCY,
  scriptSpecSchema,
  scriptSpecShape,
  type HttpSpec,
  type HttpSpecInput,
  type ScriptSpec,
  type ScriptSpecInput,
} from './job-type-specs';

export { JOB_TYPES, MAX_SHARDING_TOTAL_COUNT, SUPPORTED_JOB_TYPES, expectedValue, whenFieldsValid, withUnknownFieldsRejected, type JobType } from './job-config-fields';
export type { RetryPolicy, RetryPolicyInput, StoredErrorHandler } from './job-policies';

/** A job's stored config (`/{job}/config`), defaults applied. Frozen wherever shardcron returns one. */
export interface JobConfig {
  /** Job name, unique in the namespace: 1-128 characters from `A-Z a-z 0-9 _ -`, starting with a letter or digit ({@link JOB_NAME_PATTERN}). Required. */
  readonly name: string;
  /** Job type: `SIMPLE` (the default: code), `DATAFLOW` (code: fetch, then process), `SCRIPT` or `HTTP` (data only: creatable by API). */
  readonly type: JobType;
  /**
   * When the job fires: Quartz style (`sec min hour day-of-month month day-of-week [year]`, `?` accepted,
   * e.g. `'0/5 * * * * ?'`) or classic 5-field Unix cron, evaluated in {@link JobConfig.timeZone}.
   * Absent (the default): a trigger-only job, run only by manual triggers.
   */
  readonly cron?: string;
  /** IANA time zone the cron expression is evaluated in (e.g. `'Europe/Berlin'`). Default `'UTC'`. */
  readonly timeZone: string;
  /** Number of sharding items, 0..N-1, each run by one instance per fire. Integer 1..{@link MAX_SHARDING_TOTAL_COUNT}. Default 1. */
  readonly shardingTotalCount: number;
  /**
   * Per-item parameters `item=value,item=value` (e.g. `'0=Beijing,1=Shanghai'`), given to each item as
   * `ctx.shardingParameter`. Items >= shardingTotalCount are ignored, as in ElasticJob. Default `''`.
   */
  readonly shardingItemParameters: string;
  /** A parameter for every item of the job (`ctx.jobParameter`). Default `''`. */
  readonly jobParameter: string;
  /** Re-run the unfinished items of a lost instance on the survivors, in the same fire. Default `false`. */
  readonly failover: boolean;
  /** When a fire finds an item still running, run it once more when it ends (and catch up fires missed without a leader). Default `true`. */
  readonly misfire: boolean;
  /** Track running items in ZooKeeper (`sharding/{i}/running`), so an item never runs twice at once. Default `true`. */
  readonly monitorExecution: boolean;
  /**
   * Sharding strategy: `AVG_ALLOCATION`, `ODEVITY`, `ROUND_ROBIN` or a name registered with
   * registerShardingStrategy() before the job is defined or its config is read. `''` means the default.
   * Default `'AVG_ALLOCATION'`.
   */
  readonly shardingStrategy: string;
  /** Free text shown by the console. Default `''`. */
  readonly description: string;
  /** A disabled job is not fired (manual triggers are refused too). Default `false`. */
  readonly disabled: boolean;
  /** On registration, replace the config stored in ZooKeeper with this one (otherwise the stored one wins). Default `false`. */
  readonly overwrite: boolean;
  /** Largest tolerated clock difference between an instance and ZooKeeper, in seconds: `-1` (no check, the default) or 1..3600. */
  readonly maxTimeDiffSeconds: number;
  /** Minutes between checks that the assignment names live instances: 0 (off) or 1..1440. Default 10. */
  readonly reconcileIntervalMinutes: number;
  /** SCRIPT: the program to run (required for SCRIPT jobs, refused for others). */
  readonly script?: ScriptSpec;
  /** HTTP: the request to make (required for HTTP jobs, refused for others). */
  readonly http?: HttpSpec;
  /** DATAFLOW: fetch again until nothing comes (true), or once (false, the default). */
  readonly streaming?: boolean;
  /** DATAFLOW: chunks a fetched batch is processed in at once, 1..64. Default 1. */
  readonly processConcurrency?: number;
  /** Every type: an attempt running longer than this is aborted and ends as `timeout`. Default: none. */
  readonly timeoutMs?: number;
  /** Every type: attempts of one execution on the same instance, with back-off between them. Default: one attempt. */
  readonly retry?: RetryPolicy;
  /** Every type: what to do with a failure, as data (`LOG`, `THROW`, `IGNORE`, `{ webhook }`); a function lives in the job's code. Default `LOG`. */
  readonly errorHandler?: StoredErrorHandler;
  /** Set when the job's code has once-per-fire listeners (beforeFire/afterFire): the leader then tells each request how many items its fire has. */
  readonly fireListeners?: boolean;
}

/** A job config as written by hand or sent to the API: `name` is required, every other field has a default. */
export type JobConfigInput = Pick<JobConfig, 'name'> &
  Partial<Omit<JobConfig, 'name' | 'http' | 'script' | 'retry'>> & {
    readonly http?: HttpSpecInput;
    readonly script?: ScriptSpecInput;
    readonly retry?: RetryPolicyInput;
  };

/** The stored fields in their canonical order (also the key order of encoded configs). */
export const JOB_CONFIG_FIELDS = Object.freeze([
  'name', 'type', 'cron', 'timeZone', 'shardingTotalCount', 'shardingItemParameters', 'jobParameter', 'failover',
  'misfire', 'monitorExecution', 'shardingStrategy', 'description', 'disabled', 'overwrite', 'maxTimeDiffSeconds',
  'reconcileIntervalMinutes', 'script', 'http', 'streaming', 'processConcurrency', 'timeoutMs', 'retry', 'errorHandler',
  'fireListeners',
] as const satisfies ReadonlyArray<keyof JobConfig>);

/**
 * The field schemas of a job config, each with its semantic check. Shared with the job definition
 * schema (src/shared/config/job-definition.ts); build objects from it with {@link withJobConfigChecks}.
 */
export const jobConfigShape = {
  name: nameField,
  type: typeField,
  cron: cronField,
  timeZone: timeZoneField,
  shardingTotalCount: integerField(`an integer from 1 to ${MAX_SHARDING_TOTAL_COUNT} (MAX_SHARDING_TOTAL_COUNT)`, (n) => n >= 1 && n <= MAX_SHARDING_TOTAL_COUNT).default(1),
  shardingItemParameters: itemParametersField,
  jobParameter: textField(),
  failover: booleanField(false),
  misfire: booleanField(true),
  monitorExecution: booleanField(true),
  shardingStrategy: strategyField,
  description: textField(),
  disabled: booleanField(false),
  overwrite: booleanField(false),
  maxTimeDiffSeconds: integerField('-1 (no check) or an integer from 1 to 3600 (seconds)', (n) => n === -1 || (n >= 1 && n <= 3600)).default(-1),
  reconcileIntervalMinutes: integerField('0 (off) or an integer from 1 to 1440 (minutes)', (n) => n >= 0 && n <= 1440).default(10),
  script: z.object(scriptSpecShape, { error: expectedValue('an object { command: [program, ...args], env?, cwd?, timeoutMs? }') }).optional(),
  http: z.object(httpSpecShape, { error: expectedValue('an object { url, method?, headers?, body?, connectTimeoutMs?, readTimeoutMs? }') }).optional(),
  streaming: z.boolean({ error: expectedValue('true or false') }).optional(),
  processConcurrency: integerField(`an integer from 1 to ${MAX_PROCESS_CONCURRENCY}`, (n) => n >= 1 && n <= MAX_PROCESS_CONCURRENCY).optional(),
  timeoutMs: timeoutField.optional(),
  retry: retryField.optional(),
  errorHandler: storedErrorHandlerField.optional(),
  fireListeners: z.boolean({ error: expectedValue('true or false') }).optional(),
} satisfies Record<(typeof JOB_CONFIG_FIELDS)[number], z.ZodType>;

/**
 * Adds the cross-field checks of a job config to an object schema built from {@link jobConfigShape}:
 * the cron expression must parse in its time zone (with an invalid time zone, in UTC, so a bad
 * expression is still reported).
 */
export function withJobConfigChecks<T extends z.ZodObject>(schema: T): T {
  return schema
    .superRefine((value, ctx) => {
      const { cron, timeZone } = value as Record<string, unknown>;
      if (typeof cron !== 'string') return;
      const zone = typeof timeZone === 'string' && isValidTimeZone(timeZone) ? timeZone : undefined;
      const problem = validateCron(cron, zone);
      if (problem !== null) ctx.addIssue({ code: 'custom', path: ['cron'], message: problem });
    }, whenFieldsValid('cron'))
    .superRefine((value, ctx) => {
      // Each type's own fields: required for it, refused for the others (a misplaced field is a mistake).
      const config = value as Record<string, unknown>;
      const type = (config.type ?? 'SIMPLE') as JobType;
      for (const [field, owner] of TYPE_FIELDS) {
        const given = config[field] !== undefined;
        if (given && owner !== type) ctx.addIssue({ code: 'custom', path: [field], message: `is a ${owner} field; this job is ${type}` });
        else if (!given && owner === type && REQUIRED_TYPE_FIELDS.has(field)) {
          ctx.addIssue({ code: 'custom', path: [field], message: `is required for a ${type} job: ${field === 'script' ? '{ command: [program, ...args] }' : '{ url }'}` });
        }
      }
    }, whenFieldsValid('type'));
}

/** Fields that belong to one job type. */
const TYPE_FIELDS: ReadonlyArray<readonly [string, JobType]> = [['script', 'SCRIPT'], ['http', 'HTTP'], ['streaming', 'DATAFLOW'], ['processConcurrency', 'DATAFLOW']];
const REQUIRED_TYPE_FIELDS: ReadonlySet<string> = new Set(['script', 'http']);

export const jobConfigSchema = withJobConfigChecks(z.object(jobConfigShape)) satisfies z.ZodType<JobConfig, JobConfigInput>;

/** As {@link jobConfigSchema}, but unknown fields are refused, also inside `script`, `http` and `retry` (API bodies). */
const strictJobConfigSchema = withUnknownFieldsRejected(
  withJobConfigChecks(z.looseObject({ ...jobConfigShape, script: scriptSpecSchema.optional(), http: httpSpecSchema.optional() })),
  JOB_CONFIG_FIELDS,
);

// -------------------------------------------------------------------------------------------------
// Errors and entry points

/** `Invalid job "billing"`, or `Invalid job (no valid name)` when the input has no string name. */
export function invalidJobSubject(name: unknown): string {
  return typeof name === 'string' ? `Invalid job ${quote(name)}` : 'Invalid job (no valid name)';
}

/** The name field of an unvalidated input, if it has one. */
export function rawJobName(input: unknown): unknown {
  return isRecord(input) ? input.name : undefined;
}

/** Longer string fields (a description, item parameters) are rarely shared: not interned. */
const INTERNED_MAX_LENGTH = 64;

/**
 * Picks the stored fields of a validated config or resolved job definition, in canonical order,
 * and freezes them. Does not validate again: use {@link parseJobConfig} for unvalidated values.
 */
export function toJobConfig(definition: JobConfig): JobConfig {
  const config: Record<string, unknown> = {};
  for (const field of JOB_CONFIG_FIELDS) {
    const value = definition[field];
    if (value === undefined) continue;
    // Values jobs share (cron, time zone, strategy, type...) as one string each; not the name.
    config[field] = typeof value === 'string' && field !== 'name' && value.length <= INTERNED_MAX_LENGTH ? intern(value) : value;
  }
  return Object.freeze(config) as unknown as JobConfig;
}

/** Options of {@link parseJobConfig}. */
export interface ParseJobConfigOptions {
  /** `'ignore'` (default) drops unknown fields, as stored configs do; `'reject'` names each one (API bodies). */
  readonly unknownFields?: 'ignore' | 'reject';
}

/**
 * Validates `value` as a job config and returns it frozen, defaults applied. `subject` says where it
 * came from (`'PUT /api/jobs/billing/config'`). Throws a {@link ConfigError} INVALID_CONFIG
 * `Invalid job "<name>" (<subject>)` listing every bad field.
 */
export function parseJobConfig(value: unknown, subject: string, options: ParseJobConfigOptions = {}): JobConfig {
  const schema = options.unknownFields === 'reject' ? strictJobConfigSchema : jobConfigSchema;
  const result = schema.safeParse(value);
  if (!result.success) {
    const name = rawJobName(value);
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, `${invalidJobSubject(name)} (${subject})`, toFieldIssues(result.error), {
      job: name,
      subject,
    });
  }
  return toJobConfig(result.data as JobConfig);
}

// The schema's output has mutable arrays where JobConfig's are readonly: the same data.
const storedCodec = jsonCodec(jobConfigSchema, 'job config') as unknown as JsonCodec<JobConfig>;

/** The job a config path belongs to: the segment before `/config` (`/billing/config`, `/ns/billing/config`). */
function jobOfPath(path: string): string | undefined {
  const job = /(?:^|\/)([^/]+)\/config$/.exec(path)?.[1];
  return isValidJobName(job) ? job : undefined;
}

function nameMismatch(name: unknown, pathJob: string | undefined): FieldIssue | undefined {
  if (pathJob === undefined || !isValidJobName(name) || name === pathJob) return undefined;
  return { field: 'name', message: `${quote(name)} does not match the job node ${quote(pathJob)} this config is stored under` };
}

const REMEDY = 'fix the node, or register the job with overwrite: true to replace it';

/** The name in the stored bytes, if they are JSON with a string name. */
function storedName(data: Buffer): unknown {
  try {
    return rawJobName(JSON.parse(data.toString('utf8')));
  } catch {
    return undefined;
  }
}

/**
 * Restates a decoding failure (the codec's error, or field issues found here) with the job's name,
 * from the path, else from the data; adds the name/path mismatch to the field issues.
 */
function corruptConfig(problem: unknown, data: Buffer, path: string, pathJob: string | undefined): ShardcronError {
  const dataName = storedName(data);
  const job = pathJob ?? (isValidJobName(dataName) ? dataName : undefined);
  const subject = `${invalidJobSubject(job)}: corrupt config at ${path}`;
  const details = { path, job };
  const found = problem instanceof ConfigError ? problem.issues : Array.isArray(problem) ? (problem as FieldIssue[]) : undefined;
  if (found) {
    const issues = [...found];
    const mismatch = nameMismatch(dataName, pathJob);
    if (mismatch && !issues.some((i) => i.field === 'name')) issues.push(mismatch);
    return new ConfigError(ErrorCodes.CORRUPT_DATA, `${subject} (${REMEDY})`, issues, details);
  }
  // jsonCodec's message starts with the path this subject already names.
  const reason = (problem instanceof Error ? problem.message : String(problem)).replace(`Corrupt job config at ${path}: `, '');
  return new ShardcronError(ErrorCodes.CORRUPT_DATA, `${subject}: ${reason} (${REMEDY})`, details, { cause: problem });
}

/**
 * Codec of `/{job}/config`. `encode` validates first (nothing writes a config that would not decode)
 * and writes the fields in canonical order; it throws INVALID_CONFIG. `decode(data, path)` parses the
 * JSON and runs every check `defineJob` runs, plus: the `name` must match the job node of `path`
 * (when `path` ends in `/{job}/config`). It throws ShardcronError CORRUPT_DATA (a {@link ConfigError}
 * listing every bad field, or a plain ShardcronError for bad JSON) whose message starts with
 * `Invalid job "<name>": corrupt config at <path>`. Unknown fields are ignored; missing optional fields
 * get their defaults. Returns a frozen config.
 */
export const jobConfigCodec: JsonCodec<JobConfig> = Object.freeze({
  encode(config: JobConfig): Buffer {
    return storedCodec.encode(parseJobConfig(config, 'config to store'));
  },
  decode(data: Buffer, path: string): JobConfig {
    const pathJob = jobOfPath(path);
    let decoded: JobConfig;
    try {
      decoded = storedCodec.decode(data, path);
    } catch (err) {
      throw corruptConfig(err, data, path, pathJob);
    }
    if (nameMismatch(decoded.name, pathJob)) throw corruptConfig([], data, path, pathJob);
    return toJobConfig(decoded);
  },
});
