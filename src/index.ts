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
  type FireContext,
  type JobErrorHandler,
} from './shared/config/job-definition';
export { type JobConfig, MAX_SHARDING_TOTAL_COUNT } from './shared/config/job-config';
export {
  shardingStrategies,
  registerShardingStrategy,
  unregisterShardingStrategy,
  listShardingStrategies,
  javaStringHashCode,
  type ShardingStrategy,
} from './shared/sharding/sharding-strategies';
export { parseShardingItemParameters, formatShardingItemParameters } from './shared/sharding/sharding-item-parameters';
export { parseCron, type CronSchedule } from './shared/cron/cron';
export { loadEnvConfig, ENV_VARIABLES, type ShardcronEnvConfig, type Role } from './shared/config/env-config';
export { ShardcronError, ConfigError, ErrorCodes, type ErrorCode } from './shared/errors';
export type { ExecutionSource } from './shared/registry/execution-request';
export type { ExecutionEvent } from './worker/item-executor';
export type { ExecutionRecord, ExecutionRecordStatus } from './shared/registry/execution-record';
