import { randomBytes } from 'node:crypto';
import { ErrorCodes, hasCode, ShardcronError } from '../shared/errors';
import { registryPaths } from '../shared/registry/registry-paths';
import { triggerRequestCodec, triggerRequestSchema, type TriggerRequest } from '../shared/registry/trigger-request';
import { parseOrThrow } from '../shared/validation';
import type { ZkClient } from '../shared/zk';
import { conflict, jobNotFound } from './admin-errors';
import { readJobConfig } from './config-store';

/** Digits of an epoch ms time until the year 2286: request ids of one length sort by time as text. */
const TIME_DIGITS = 13;

/**
 * A new trigger request id: the request time (epoch ms, 13 digits) and 48 random bits in hex,
 * `1763776800123-5f0c9a1b2e7d`. Ids sort by request time as plain strings (ZooKeeper lists children
 * unsorted; the leader and the console sort them), are unique without coordination, and are valid
 * ZooKeeper node names and BullMQ id parts (no `/`, no `:`).
 */
export function newTriggerRequestId(requestedAt: number): string {
  return `${String(requestedAt).padStart(TIME_DIGITS, '0')}-${randomBytes(6).toString('hex')}`;
}

/** Options of {@link writeTriggerRequest}. */
export interface TriggerOptions {
  /** Who asks, kept in the request for operators (`cli:alice@host`, a console user); at most 200 characters. */
  requestedBy?: string;
  /** Epoch ms now; default Date.now. */
  now?: number;
}

/** Attempts before giving up: each failed one means the config changed or an id collided meanwhile. */
const MAX_ATTEMPTS = 10;

/**
 * Writes a manual trigger request `/{job}/trigger/{requestId}` for the leader (DESIGN.md flow 10)
 * and returns it. The write is one multi that also checks the config version it judged the job
 * by, so a job disabled or removed in between is never triggered. Throws INVALID_CONFIG (a name
 * that cannot be a job, a `requestedBy` over 200 characters), JOB_NOT_FOUND, JOB_DISABLED,
 * CORRUPT_DATA (an unreadable config), CONFLICT.
 */
export async function writeTriggerRequest(zk: ZkClient, job: string, options: TriggerOptions = {}): Promise<TriggerRequest> {
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
    const { config, version } = await readJobConfig(zk, job);
    if (config.disabled) {
      throw new ShardcronError(ErrorCodes.JOB_DISABLED, `Job ${JSON.stringify(job)} is disabled: a disabled job is not triggered; enable it first`, { job });
    }
    const requestedAt = options.now ?? Date.now();
    const requestId = newTriggerRequestId(requestedAt);
    const request: TriggerRequest = { requestId, requestedAt, ...(options.requestedBy !== undefined && { requestedBy: options.requestedBy }) };
    // Validates (requestedBy's length) before anything is written.
    const data = triggerRequestCodec.encode(parseOrThrow(triggerRequestSchema, request, `trigger request for job ${JSON.stringify(job)}`));
    try {
      await zk.multi().check(registryPaths.jobConfig(job), version).create(registryPaths.trigger(job, requestId), data).commit();
      return request;
    } catch (err) {
      const failedOp = hasCode(err, ErrorCodes.ZK_NO_NODE) || hasCode(err, ErrorCodes.ZK_BAD_VERSION) ? (err.details.opIndex as number | undefined) : undefined;
      if (failedOp === 0 && hasCode(err, ErrorCodes.ZK_NO_NODE)) throw jobNotFound(job);
      if (failedOp === 0) continue; // the config changed: judge the job again
      if (failedOp === 1) {
        await createTriggersNode(zk, job);
        continue;
      }
      if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) continue; // an id collision: draw another
      throw err;
    }
  }
  throw conflict(`Could not write a trigger request for job ${JSON.stringify(job)}: the job kept changing; try again`, { job });
}

/**
 * Creates `/{job}/trigger` when it is missing: a plain create, not a mkdirp, so a job removed
 * meanwhile is not brought back (its parent is gone and the create fails).
 */
async function createTriggersNode(zk: ZkClient, job: string): Promise<void> {
  try {
    await zk.create(registryPaths.triggers(job));
  } catch (err) {
    if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) return;
    if (hasCode(err, ErrorCodes.ZK_NO_NODE)) throw jobNotFound(job);
    throw err;
  }
}
