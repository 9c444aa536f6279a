/** shardcron's public API. */
export { startNode, type ShardcronNode, type StartNodeOptions } from './node';
export {
  defineJob,
  type JobDefinition,
  type ResolvedJobDefinition,
  type ShardingContext,
  type ExecutionOutcome,
  type ExecutionStatus,
  type JobListeners,
  type JobErrorHandler,
} from './shared/job-definition';
export { type JobConfig, MAX_SHARDING_TOTAL_COUNT } from './shared/job-config';
export {
  shardingStrategies,
  registerShardingStrategy,
  unregisterShardingStrategy,
  listShardingStrategies,
  javaStringHashCode,
  type ShardingStrategy,
} from './shared/sharding-strategies';
export { parseShardingItemParameters, formatShardingItemParameters } from './shared/sharding-item-parameters';
export { parseCron, type CronSchedule } from './shared/cron';
export { loadEnvConfig, ENV_VARIABLES, type ShardcronEnvConfig, type Role } from './shared/env-config';
export { ShardcronError, ConfigError, ErrorCodes, type ErrorCode } from './shared/errors';
export type { ExecutionSource } from './shared/execution-request';
export type { ExecutionRecord } from './worker/item-executor';
