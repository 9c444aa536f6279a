import { z } from 'zod';
import { ExecutionSources } from './execution-request';

/** How one execution ended, as the history and the console report it. */
export const ExecutionRecordStatuses = ['completed', 'failed', 'aborted', 'skipped', 'timeout'] as const;
export type ExecutionRecordStatus = (typeof ExecutionRecordStatuses)[number];

/** Most characters of an error's message (and name) kept in a record: 4 KB in all, as DESIGN.md says. */
export const RECORD_ERROR_MAX_CHARS = 4_000;

/**
 * One execution of one item of one fire on one instance, as kept in the history (the recent list in
 * Redis, ElasticJob's traces in PostgreSQL) and answered by `GET /api/jobs/:name/executions`
 * (DESIGN.md "Console contract": keep these field names).
 */
export const executionRecordSchema = z.object({
  job: z.string().min(1),
  item: z.number().int().nonnegative(),
  fireTime: z.number().int().nonnegative(),
  source: z.enum(ExecutionSources),
  instanceId: z.string().min(1),
  status: z.enum(ExecutionRecordStatuses),
  /** Attempts made (retry policy); 1 without retries, 0 for a skipped execution. */
  attempts: z.number().int().nonnegative(),
  startedAt: z.number().int().nonnegative(),
  finishedAt: z.number().int().nonnegative(),
  durationMs: z.number().int().nonnegative(),
  error: z.object({ name: z.string(), message: z.string() }).optional(),
  /** Why it ended so when it is not the handler's doing (skipped, aborted). */
  reason: z.string().optional(),
  /** DATAFLOW: records processed and failed. */
  processed: z.number().int().nonnegative().optional(),
  failed: z.number().int().nonnegative().optional(),
  /** SCRIPT: the exit code; HTTP: the status code. */
  exitCode: z.number().int().optional(),
  httpStatus: z.number().int().optional(),
});

export type ExecutionRecord = z.output<typeof executionRecordSchema>;

const SOURCES: ReadonlySet<unknown> = new Set(executionRecordSchema.shape.source.options);
const STATUSES: ReadonlySet<unknown> = new Set(ExecutionRecordStatuses);
const KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(executionRecordSchema.shape));
const isCount = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isOptionalCount = (v: unknown): boolean => v === undefined || isCount(v);

/**
 * True when `value` is an ExecutionRecord as {@link executionRecordSchema} would accept it and with
 * no other field: the check of every record a worker writes to its history, ten times cheaper than
 * the schema's parse (which remains the way to learn what is wrong with one that is not).
 */
export function isExecutionRecord(value: unknown): value is ExecutionRecord {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  for (const key in r) if (!KNOWN_FIELDS.has(key)) return false;
  const error = r.error as { name?: unknown; message?: unknown } | undefined;
  return (
    typeof r.job === 'string' && r.job.length > 0 && typeof r.instanceId === 'string' && r.instanceId.length > 0 &&
    isCount(r.item) && isCount(r.fireTime) && isCount(r.attempts) && isCount(r.startedAt) && isCount(r.finishedAt) && isCount(r.durationMs) &&
    SOURCES.has(r.source) && STATUSES.has(r.status) &&
    (error === undefined || (typeof error === 'object' && error !== null && typeof error.name === 'string' && typeof error.message === 'string' && Object.keys(error).length === 2)) &&
    (r.reason === undefined || typeof r.reason === 'string') &&
    isOptionalCount(r.processed) && isOptionalCount(r.failed) &&
    (r.exitCode === undefined || (typeof r.exitCode === 'number' && Number.isSafeInteger(r.exitCode))) &&
    (r.httpStatus === undefined || (typeof r.httpStatus === 'number' && Number.isSafeInteger(r.httpStatus)))
  );
}

/** `{ name, message }` of what a handler threw, bounded to {@link RECORD_ERROR_MAX_CHARS} in all. */
export function recordError(error: unknown): { name: string; message: string } {
  const name = (error instanceof Error ? error.name : typeof error).slice(0, 200);
  const message = error instanceof Error ? error.message : String(error);
  const room = RECORD_ERROR_MAX_CHARS - name.length;
  return { name, message: message.length > room ? `${message.slice(0, room - 3)}...` : message };
}
