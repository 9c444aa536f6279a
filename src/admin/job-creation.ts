/**
 * Jobs defined by data (DESIGN.md "Job types contract"): a SCRIPT or HTTP job stored by the API or
 * the CLI, with no code anywhere. Workers started with SHARDCRON_WORKER_GENERIC run it.
 */
import { invalidJobSubject, jobConfigCodec, parseJobConfig, type JobConfig } from '../shared/config/job-config';
import { ConfigError, ErrorCodes, hasCode } from '../shared/errors';
import { registryPaths } from '../shared/registry/registry-paths';
import type { ZkClient } from '../shared/zk';
import { conflict } from './admin-errors';

/** The job types a config alone can run. */
export const DATA_JOB_TYPES: ReadonlySet<string> = new Set(['SCRIPT', 'HTTP']);

/**
 * Validates `body` as a whole config of a SCRIPT or HTTP job (unknown fields refused by name) and
 * stores it as `/{name}/config`; the create of that node decides, so two creations of one name never
 * both succeed. Throws INVALID_CONFIG naming every bad field (a SIMPLE or DATAFLOW job needs code:
 * `type` is named), CONFLICT when a job of that name exists.
 */
export async function createDataJob(zk: ZkClient, body: unknown, subject: string): Promise<JobConfig> {
  const config = parseJobConfig(body, subject, { unknownFields: 'reject' });
  if (!DATA_JOB_TYPES.has(config.type)) {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, `${invalidJobSubject(config.name)} (${subject})`, [
      { field: 'type', message: `${config.type} jobs need code (a jobs module); a job defined by data is SCRIPT or HTTP` },
    ]);
  }
  const { name } = config;
  await zk.ensurePath(registryPaths.job(name));
  try {
    await zk.create(registryPaths.jobConfig(name), jobConfigCodec.encode(config));
  } catch (err) {
    if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) {
      throw conflict(`A job named ${JSON.stringify(name)} exists; change it with PUT /api/jobs/${name}/config, or remove it first`, { job: name });
    }
    throw err;
  }
  await zk.ensurePath(registryPaths.jobServers(name));
  return config;
}
