import { jobConfigCodec, type JobConfig } from '../shared/config/job-config';
import { ErrorCodes, hasCode } from '../shared/errors';
import { assertJobName, registryPaths } from '../shared/registry/registry-paths';
import type { NodeStamp, ZkClient } from '../shared/zk';
import { conflict, jobNotFound } from './admin-errors';

/** Read-modify-write attempts before giving up with CONFLICT: each failed one means someone else wrote. */
const MAX_ATTEMPTS = 10;

/** A job's stored config and the write of its node it was read at. */
export interface StoredConfig extends NodeStamp {
  readonly config: JobConfig;
}

/**
 * Reads and validates `/{job}/config`. Throws INVALID_CONFIG for a name that cannot be a job,
 * JOB_NOT_FOUND when the node is absent, CORRUPT_DATA (naming the path and every bad field) when it
 * does not read as a config.
 */
export async function readJobConfig(zk: ZkClient, job: string): Promise<StoredConfig> {
  assertJobName(job, 'job');
  const path = registryPaths.jobConfig(job);
  try {
    const { data, stat } = await zk.get(path);
    return { config: jobConfigCodec.decode(data, path), version: stat.version, ctimeMs: stat.ctimeMs };
  } catch (err) {
    if (hasCode(err, ErrorCodes.ZK_NO_NODE)) throw jobNotFound(job);
    throw err;
  }
}

/** What {@link rewriteJobConfig} did. */
export interface ConfigRewrite {
  /** The config now stored. */
  readonly config: JobConfig;
  /** False when `change` asked for no write (the config already said so). */
  readonly changed: boolean;
  /** The write that holds `config`: what a watch of the node must reach to show it. */
  readonly stamp: NodeStamp;
}

/**
 * A versioned read-modify-write of `/{job}/config`: `change` gets the stored config and returns the
 * one to store, or undefined for no write. The write is conditional on the version read, so a
 * concurrent writer (a worker registering with overwrite, another operator) is never overwritten
 * blindly: on a version conflict the config is read again and `change` runs again, up to
 * {@link MAX_ATTEMPTS} times, then CONFLICT. `change` may throw to refuse (its error propagates).
 */
export async function rewriteJobConfig(zk: ZkClient, job: string, change: (config: JobConfig) => JobConfig | undefined): Promise<ConfigRewrite> {
  for (let attempt = 1; ; attempt += 1) {
    const { config, ...stamp } = await readJobConfig(zk, job);
    const next = change(config);
    if (next === undefined) return { config, changed: false, stamp };
    try {
      const stat = await zk.set(registryPaths.jobConfig(job), jobConfigCodec.encode(next), stamp.version);
      return { config: next, changed: true, stamp: { version: stat.version, ctimeMs: stat.ctimeMs } };
    } catch (err) {
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) throw jobNotFound(job);
      if (!hasCode(err, ErrorCodes.ZK_BAD_VERSION)) throw err;
      if (attempt >= MAX_ATTEMPTS) {
        throw conflict(`The config of job ${JSON.stringify(job)} changed ${attempt} times while it was being updated; try again`, { job, attempts: attempt });
      }
    }
  }
}
