import type { ExecutionRequest } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import { formatTaskId, type ShardingContext } from '../shared/job-definition';
import type { Logger } from '../shared/logger';
import { parseShardingItemParameters } from '../shared/sharding-item-parameters';

/** job -> the shardingItemParameters string last parsed and its result (configs rarely change). */
const parsedParameters = new Map<string, { source: string; parsed: Readonly<Record<number, string>> }>();

/** This item's parameter under `config`, parsing the job's parameter string once per change. */
export function shardingParameterOf(config: JobConfig, job: string, item: number): string {
  let entry = parsedParameters.get(job);
  if (entry?.source !== config.shardingItemParameters) {
    entry = { source: config.shardingItemParameters, parsed: parseShardingItemParameters(config.shardingItemParameters) };
    parsedParameters.set(job, entry);
  }
  return entry.parsed[item] ?? '';
}

/**
 * The ShardingContext handed to a handler. `taskId`, `log` and `signal` are made on first use (many
 * handlers never read them; an AbortController chained to the worker's stop signal costs more than
 * the rest of the context); they are own enumerable accessors, so spreading or destructuring the
 * context still sees them.
 */
export function createShardingContext(
  config: JobConfig,
  request: ExecutionRequest,
  instanceId: string,
  makeSignal: () => AbortSignal,
  assertOwnership: () => void,
  parentLog: Logger,
): ShardingContext {
  const { job, item, fireTime, source } = request;
  let taskId: string | undefined;
  let log: Logger | undefined;
  let signal: AbortSignal | undefined;
  return {
    jobName: job,
    get taskId() {
      return (taskId ??= formatTaskId({ jobName: job, fireTime, shardingItem: item, instanceId }));
    },
    shardingTotalCount: config.shardingTotalCount,
    jobParameter: config.jobParameter,
    shardingItem: item,
    shardingParameter: shardingParameterOf(config, job, item),
    fireTime,
    source,
    instanceId,
    get signal() {
      return (signal ??= makeSignal());
    },
    assertOwnership,
    get log() {
      return (log ??= parentLog.child({ job, item, fireTime }));
    },
  };
}
