import { jobConfigShape, parseJobConfig, type JobConfig } from '../shared/config/job-config';
import { ConfigError, ErrorCodes, type FieldIssue } from '../shared/errors';
import type { NodeStamp, ZkClient } from '../shared/zk';
import { rewriteJobConfig } from './config-store';

/** Fields that identify a job: an update may repeat them, never change them. */
const FIXED_FIELDS = ['name', 'type'] as const;

/**
 * The fields `null` in an update removes: every field of a job config but `name` and `type`. An
 * optional one becomes unset (`cron: null`: trigger-only; `timeoutMs: null`: no timeout), one with a
 * default takes its default again, a required one is reported missing. Before, only `cron` took
 * `null`, and a `timeoutMs` or `retry` once set could not be taken away through the API.
 */
const REMOVABLE_FIELDS: ReadonlySet<string> = new Set([...Object.keys(jobConfigShape), 'script', 'http'].filter((f) => !(FIXED_FIELDS as readonly string[]).includes(f)));

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The config that results from applying `update` (some fields of a job config, as `PUT
 * /api/jobs/:name/config` sends them) to `stored`. The result is validated exactly as `defineJob`
 * validates a definition (same field schemas, same cron check in the job's time zone), and every
 * problem is reported at once in one ConfigError INVALID_CONFIG naming each field: unknown fields
 * (with a did-you-mean), `name` and `type` given with another value than the stored one, bad values.
 * `null` removes a field ({@link REMOVABLE_FIELDS}; `cron: null`: a trigger-only job). Pure.
 */
export function applyConfigUpdate(stored: JobConfig, update: unknown): JobConfig {
  const subject = `Invalid config update for job ${JSON.stringify(stored.name)}`;
  if (!isPlainObject(update)) {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, subject, [{ field: '(root)', message: 'expected an object of job config fields, e.g. {"cron": "0 * * * * ?"}' }], { job: stored.name });
  }
  const issues: FieldIssue[] = [];
  for (const field of FIXED_FIELDS) {
    if (Object.hasOwn(update, field) && update[field] !== stored[field]) {
      issues.push({ field, message: `cannot be changed (stored: ${JSON.stringify(stored[field])}); ${field === 'name' ? 'a job is renamed by defining a new one and removing the old' : 'define a new job for another type'}` });
    }
  }
  const merged: Record<string, unknown> = { ...stored };
  for (const [field, value] of Object.entries(update)) {
    if ((FIXED_FIELDS as readonly string[]).includes(field)) continue;
    if (value === null && REMOVABLE_FIELDS.has(field)) delete merged[field];
    else merged[field] = value;
  }
  try {
    const config = parseJobConfig(merged, 'config update', { unknownFields: 'reject' });
    if (issues.length === 0) return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    issues.push(...err.issues);
  }
  throw new ConfigError(ErrorCodes.INVALID_CONFIG, subject, issues, { job: stored.name });
}

/**
 * Applies `update` ({@link applyConfigUpdate}) to the stored config of `job` with a versioned write,
 * validated again on each retry against what is stored then; an update that changes nothing writes
 * nothing. Returns the config now stored, with the write that holds it.
 * Throws JOB_NOT_FOUND, INVALID_CONFIG (every bad field), CORRUPT_DATA (the stored config is
 * unreadable: fix it by hand, or re-register the job with overwrite), CONFLICT.
 */
export async function updateJobConfig(zk: ZkClient, job: string, update: unknown): Promise<{ config: JobConfig; stamp: NodeStamp }> {
  const { config, stamp } = await rewriteJobConfig(zk, job, (stored) => {
    const next = applyConfigUpdate(stored, update);
    // Both are in canonical field order: an update that changes nothing writes nothing.
    return JSON.stringify(next) === JSON.stringify(stored) ? undefined : next;
  });
  return { config, stamp };
}
