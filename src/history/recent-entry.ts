/**
 * How one ExecutionRecord is stored in a job's recent list: a JSON array of its fields in a fixed
 * order, without the job (the list's key names it) and without field names.
 *
 *   [1, item, fireTime, source, instanceId, status, attempts, startedAt, durationMs, extra?]
 *
 * `1` is the form's version; `extra` is an object of the optional fields (error, reason, processed,
 * failed, exitCode, httpStatus, and finishedAt when it is not startedAt + durationMs), present only
 * when one is. A completed run takes about 80 characters instead of the 210 of the record as an
 * object, and a stored record about 74 bytes of Redis memory instead of 203 (docs/history.md). Records stored as objects (earlier versions) are
 * still read.
 */
import { executionRecordSchema, type ExecutionRecord } from '../shared/registry/execution-record';
import { toFieldIssues } from '../shared/validation';

const VERSION = 1;

/** The record's optional fields, which go into `extra` when present (with finishedAt when it is not startedAt + durationMs). */
const OPTIONAL = ['error', 'reason', 'processed', 'failed', 'exitCode', 'httpStatus'] as const;

/**
 * The list entry of `record`. Trusts its input to be a valid record (the worker builds them from
 * validated requests); what is read back is validated by {@link decodeRecentEntry}.
 */
export function encodeRecentEntry(record: ExecutionRecord): string {
  const { item, fireTime, source, instanceId, status, attempts, startedAt, durationMs } = record;
  let extra: Record<string, unknown> | undefined;
  for (const field of OPTIONAL) if (record[field] !== undefined) (extra ??= {})[field] = record[field];
  if (record.finishedAt !== startedAt + durationMs) (extra ??= {}).finishedAt = record.finishedAt;
  const fields = [VERSION, item, fireTime, source, instanceId, status, attempts, startedAt, durationMs];
  return JSON.stringify(extra ? [...fields, extra] : fields);
}

/**
 * The record an entry of `job`'s list holds, validated; either form (array or, from earlier
 * versions, object). Throws an Error saying what is wrong: not JSON, an unknown form, a field's
 * problem, or a record of another job.
 */
export function decodeRecentEntry(entry: string, job: string): ExecutionRecord {
  const value: unknown = JSON.parse(entry);
  let candidate: unknown = value;
  if (Array.isArray(value)) {
    if (value[0] !== VERSION || value.length < 9 || value.length > 10) throw new Error(`not a recent-list entry of form ${VERSION} (${value.length} elements, first ${JSON.stringify(value[0])})`);
    const [, item, fireTime, source, instanceId, status, attempts, startedAt, durationMs, extra] = value as unknown[];
    const extraFields = extra === undefined ? {} : extra;
    if (typeof extraFields !== 'object' || extraFields === null || Array.isArray(extraFields)) throw new Error('extra: not an object');
    const finishedAt = typeof startedAt === 'number' && typeof durationMs === 'number' ? startedAt + durationMs : undefined;
    candidate = { job, item, fireTime, source, instanceId, status, attempts, startedAt, finishedAt, durationMs, ...extraFields };
  }
  const result = executionRecordSchema.safeParse(candidate);
  if (!result.success) throw new Error(toFieldIssues(result.error).map((i) => `${i.field}: ${i.message}`).join('; '));
  if (result.data.job !== job) throw new Error(`a record of job ${JSON.stringify(result.data.job)}`);
  return result.data;
}
