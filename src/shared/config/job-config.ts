/**
 * The stored job config: the serializable part of a job definition, kept as JSON at `/{job}/config`.
 *
 * Every rule about a job's settings lives here, once: `defineJob` (src/shared/job-definition.ts),
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
import { JOB_NAME_PATTERN, isValidJobName } from '../registry/registry-paths';
import { parseShardingItemParameters } from '../sharding/sharding-item-parameters';
import { DEFAULT_SHARDING_STRATEGY, listShardingStrategies } from '../sharding/sharding-strategies';
import { toFieldIssues } from '../validation';

/** Upper limit of `shardingTotalCount`: one leader tracks every item of every fire. */
export const MAX_SHARDING_TOTAL_COUNT = 1000;

/** Job types ElasticJob knows. Only {@link SUPPORTED_JOB_TYPES} can be run by this version. */
export const JOB_TYPES = Object.freeze(['SIMPLE', 'DATAFLOW', 'SCRIPT', 'HTTP'] as const);
/** One job type name. */
export type JobType = (typeof JOB_TYPES)[number];
/** Job types this version runs; the others are refused with a clear error rather than ignored. */
export const SUPPORTED_JOB_TYPES: readonly JobType[] = Object.freeze(['SIMPLE']);

/** A job's stored config (`/{job}/config`), defaults applied. Frozen wherever shardcron returns one. */
export interface JobConfig {
  /** Job name, unique in the namespace: 1-128 characters from `A-Z a-z 0-9 _ -`, starting with a letter or digit ({@link JOB_NAME_PATTERN}). Required. */
  readonly name: string;
  /** Job type. Default `'SIMPLE'`; `DATAFLOW`, `SCRIPT` and `HTTP` are recognised but not supported in this version. */
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
}

/** A job config as written by hand or sent to the API: `name` is required, every other field has a default. */
export type JobConfigInput = Pick<JobConfig, 'name'> & Partial<Omit<JobConfig, 'name'>>;

/** The stored fields in their canonical order (also the key order of encoded configs). */
export const JOB_CONFIG_FIELDS = Object.freeze([
  'name', 'type', 'cron', 'timeZone', 'shardingTotalCount', 'shardingItemParameters', 'jobParameter', 'failover',
  'misfire', 'monitorExecution', 'shardingStrategy', 'description', 'disabled', 'overwrite', 'maxTimeDiffSeconds',
  'reconcileIntervalMinutes',
] as const satisfies ReadonlyArray<keyof JobConfig>);

// -------------------------------------------------------------------------------------------------
// Field schemas: each one carries its own semantic check, so every caller gets it.

const quote = (value: string): string => JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}...` : value);

function describeValue(value: unknown): string {
  if (typeof value === 'string') return quote(value);
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** zod error map: "is required" for a missing value, else "expected X, got Y". */
export function expectedValue(what: string) {
  return (issue: { input?: unknown }): string =>
    issue.input === undefined ? `is required: expected ${what}` : `expected ${what}, got ${describeValue(issue.input)}`;
}

function integerField(expected: string, accept: (n: number) => boolean) {
  return z.number({ error: expectedValue(expected) }).superRefine((n, ctx) => {
    if (!Number.isInteger(n)) ctx.addIssue({ code: 'custom', message: `${n} is not a whole number; expected ${expected}` });
    else if (!accept(n)) ctx.addIssue({ code: 'custom', message: `${n} is out of range; expected ${expected}` });
  });
}

const booleanField = (fallback: boolean) => z.boolean({ error: expectedValue('true or false') }).default(fallback);
const textField = () => z.string({ error: expectedValue('a string') }).default('');

const nameField = z.string({ error: expectedValue('a job name') }).superRefine((name, ctx) => {
  if (!JOB_NAME_PATTERN.test(name)) {
    ctx.addIssue({
      code: 'custom',
      message: `${quote(name)} is not a valid job name: expected 1-128 characters from A-Z a-z 0-9 _ -, starting with a letter or digit`,
    });
  }
});

const typeField = z
  .enum(JOB_TYPES, {
    error: (iss) => `${describeValue(iss.input)} is not a job type; expected ${SUPPORTED_JOB_TYPES.join(' or ')}`,
  })
  .superRefine((type, ctx) => {
    if (!SUPPORTED_JOB_TYPES.includes(type)) {
      ctx.addIssue({
        code: 'custom',
        message: `job type ${type} is not supported in this version of shardcron; supported: ${SUPPORTED_JOB_TYPES.join(', ')}`,
      });
    }
  })
  .default('SIMPLE');

// The expression itself is checked by the cross-field check below: it needs the time zone.
const cronField = z
  .string({ error: expectedValue('a cron expression such as "0/5 * * * * ?", or no cron at all for a trigger-only job') })
  .superRefine((cron, ctx) => {
    if (cron.trim() === '') ctx.addIssue({ code: 'custom', message: 'is empty: omit cron for a trigger-only job, or give an expression such as "0/5 * * * * ?"' });
  })
  .optional();

const timeZoneField = z
  .string({ error: expectedValue('an IANA time zone such as "UTC" or "Europe/Berlin"') })
  .superRefine((tz, ctx) => {
    if (!isValidTimeZone(tz)) {
      ctx.addIssue({
        code: 'custom',
        message: `${quote(tz)} is not an IANA time zone known to this runtime; expected a name such as "UTC", "Europe/Berlin" or "America/New_York" (fixed offsets: "Etc/GMT-2" is UTC+2)`,
      });
    }
  })
  .default('UTC');

const itemParametersField = z
  .string({ error: expectedValue('a string of item=value pairs such as "0=A,1=B"') })
  .superRefine((params, ctx) => {
    try {
      parseShardingItemParameters(params);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    }
  })
  .default('');

const strategyField = z
  .string({ error: expectedValue('a sharding strategy name') })
  .superRefine((name, ctx) => {
    if (name === '' || listShardingStrategies().includes(name)) return;
    ctx.addIssue({
      code: 'custom',
      message: `unknown sharding strategy ${quote(name)}; known: ${listShardingStrategies().join(', ')}. Register a custom strategy with registerShardingStrategy() before defining the job or reading its config`,
    });
  })
  // ElasticJob reads an empty strategy type as its default.
  .transform((name) => (name === '' ? DEFAULT_SHARDING_STRATEGY : name))
  .default(DEFAULT_SHARDING_STRATEGY);

/**
 * The field schemas of a job config, each with its semantic check. Shared with the job definition
 * schema (src/shared/job-definition.ts); build objects from it with {@link withJobConfigChecks}.
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
} satisfies Record<(typeof JOB_CONFIG_FIELDS)[number], z.ZodType>;

// -------------------------------------------------------------------------------------------------
// Checks over the whole object. Each runs only when the fields it reads are valid, so it never
// reports a follow-on error, and regardless of other fields' errors, so every problem is listed at once.

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** zod refinement options: run when the value is an object and none of `fields` has an issue. */
export function whenFieldsValid(...fields: string[]): { when: (payload: z.core.ParsePayload) => boolean } {
  return {
    when: (payload) => isRecord(payload.value) && !payload.issues.some((i) => fields.includes(String(i.path?.[0]))),
  };
}

/**
 * Adds the cross-field checks of a job config to an object schema built from {@link jobConfigShape}:
 * the cron expression must parse in its time zone (with an invalid time zone, in UTC, so a bad
 * expression is still reported).
 */
export function withJobConfigChecks<T extends z.ZodObject>(schema: T): T {
  return schema.superRefine((value, ctx) => {
    const { cron, timeZone } = value as Record<string, unknown>;
    if (typeof cron !== 'string') return;
    const zone = typeof timeZone === 'string' && isValidTimeZone(timeZone) ? timeZone : undefined;
    const problem = validateCron(cron, zone);
    if (problem !== null) ctx.addIssue({ code: 'custom', path: ['cron'], message: problem });
  }, whenFieldsValid('cron'));
}

/**
 * Did-you-mean for a mistyped field: a case-insensitive match, else the one field the key is a
 * prefix of (`jobParam`), else the closest within edit distance 2.
 */
function suggestField(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  const exact = known.find((k) => k.toLowerCase() === lower);
  if (exact) return ` (did you mean ${exact}?)`;
  const extensions = known.filter((k) => k.toLowerCase().startsWith(lower));
  if (lower.length >= 3 && extensions.length === 1) return ` (did you mean ${extensions[0]}?)`;
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best ? ` (did you mean ${best}?)` : '';
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * Adds a check to a `z.looseObject` schema that reports every field not in `known`, by name, with
 * a did-you-mean hint (typo protection: a misspelt `shardingTotalcount` would otherwise silently
 * leave the default in place).
 */
export function withUnknownFieldsRejected<T extends z.ZodObject>(schema: T, known: readonly string[]): T {
  return schema.superRefine((value, ctx) => {
    for (const key of Object.keys(value as Record<string, unknown>).filter((k) => !known.includes(k)).sort()) {
      ctx.addIssue({ code: 'custom', path: [key], message: `unknown field${suggestField(key, known)}; known fields: ${known.join(', ')}` });
    }
  }, { when: (payload) => isRecord(payload.value) });
}

/**
 * The zod schema of a stored job config: input {@link JobConfigInput}, output {@link JobConfig}
 * (defaults applied, `''` strategy read as the default). Unknown fields are dropped, not refused:
 * they may come from a newer version.
 */
export const jobConfigSchema = withJobConfigChecks(z.object(jobConfigShape)) satisfies z.ZodType<JobConfig, JobConfigInput>;

const strictJobConfigSchema = withUnknownFieldsRejected(withJobConfigChecks(z.looseObject(jobConfigShape)), JOB_CONFIG_FIELDS);

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

/**
 * Picks the stored fields of a validated config or resolved job definition, in canonical order,
 * and freezes them. Does not validate again: use {@link parseJobConfig} for unvalidated values.
 */
export function toJobConfig(definition: JobConfig): JobConfig {
  const config: Record<string, unknown> = {};
  for (const field of JOB_CONFIG_FIELDS) if (definition[field] !== undefined) config[field] = definition[field];
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

const storedCodec = jsonCodec(jobConfigSchema, 'job config');

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
