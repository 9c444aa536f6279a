/**
 * The error catalogue. Every error shardcron throws on purpose is a {@link ShardcronError} with a
 * stable `code`; callers branch on `code`, never on message text.
 */

/** Stable error codes. Adding one is fine; renaming one is a breaking change. */
export const ErrorCodes = {
  /** Environment or job configuration failed validation. */
  INVALID_CONFIG: 'SHARDCRON_INVALID_CONFIG',
  /** A cron expression cannot be parsed or cannot be honoured. */
  INVALID_CRON: 'SHARDCRON_INVALID_CRON',
  /** shardingItemParameters is malformed. */
  INVALID_ITEM_PARAMETERS: 'SHARDCRON_INVALID_ITEM_PARAMETERS',
  /** A sharding strategy name is not registered. */
  UNKNOWN_STRATEGY: 'SHARDCRON_UNKNOWN_STRATEGY',
  /** Data read back from ZooKeeper does not match its schema. */
  CORRUPT_DATA: 'SHARDCRON_CORRUPT_DATA',
  /** This process is no longer the leader (or never was); the write was refused. */
  LEADERSHIP_LOST: 'SHARDCRON_LEADERSHIP_LOST',
  /** An execution may no longer be ours: the session was lost or the item moved. */
  NOT_OWNER: 'SHARDCRON_NOT_OWNER',
  /** A job handler threw or rejected (its errorHandler has run). */
  EXECUTION_FAILED: 'SHARDCRON_EXECUTION_FAILED',
  /** This host's clock differs from ZooKeeper's by more than a job's maxTimeDiffSeconds. */
  CLOCK_SKEW: 'SHARDCRON_CLOCK_SKEW',
  /** A required local binary (ZooKeeper, redis-server, java) is missing. */
  MISSING_DEPENDENCY: 'SHARDCRON_MISSING_DEPENDENCY',
  /** A local service did not start or answer in time. */
  SERVICE_START_FAILED: 'SHARDCRON_SERVICE_START_FAILED',
  /** An operation was attempted on a closed object. */
  CLOSED: 'SHARDCRON_CLOSED',
  /** A wait ran past its deadline. */
  TIMEOUT: 'SHARDCRON_TIMEOUT',
  /** No job of that name in the namespace (or it has no config): the console answers 404. */
  JOB_NOT_FOUND: 'SHARDCRON_JOB_NOT_FOUND',
  /** Something else named by an operator does not exist: a sharding item, a server IP, an instance. */
  NOT_FOUND: 'SHARDCRON_NOT_FOUND',
  /** The operation is refused because the job is disabled (a manual trigger): enable it first. */
  JOB_DISABLED: 'SHARDCRON_JOB_DISABLED',
  /**
   * The operation collided with concurrent changes and gave up after retrying (a config rewritten
   * many times meanwhile, nodes that keep appearing under a job being removed); run it again.
   */
  CONFLICT: 'SHARDCRON_CONFLICT',
  /**
   * Redis failed a command a worker needs before it can run an item (an item lease's record): the
   * request goes back to its queue and is taken again.
   */
  REDIS_UNAVAILABLE: 'SHARDCRON_REDIS_UNAVAILABLE',
  // ZooKeeper failures, mapped from numeric codes in one place (src/shared/zk/zk-errors.ts).
  ZK_NO_NODE: 'SHARDCRON_ZK_NO_NODE',
  ZK_NODE_EXISTS: 'SHARDCRON_ZK_NODE_EXISTS',
  ZK_BAD_VERSION: 'SHARDCRON_ZK_BAD_VERSION',
  ZK_NOT_EMPTY: 'SHARDCRON_ZK_NOT_EMPTY',
  ZK_NO_AUTH: 'SHARDCRON_ZK_NO_AUTH',
  ZK_AUTH_FAILED: 'SHARDCRON_ZK_AUTH_FAILED',
  ZK_CONNECTION_LOSS: 'SHARDCRON_ZK_CONNECTION_LOSS',
  ZK_SESSION_EXPIRED: 'SHARDCRON_ZK_SESSION_EXPIRED',
  ZK_OPERATION_TIMEOUT: 'SHARDCRON_ZK_OPERATION_TIMEOUT',
  ZK_NO_CHILDREN_FOR_EPHEMERALS: 'SHARDCRON_ZK_NO_CHILDREN_FOR_EPHEMERALS',
  ZK_INVALID_ACL: 'SHARDCRON_ZK_INVALID_ACL',
  ZK_BAD_ARGUMENTS: 'SHARDCRON_ZK_BAD_ARGUMENTS',
  ZK_CONNECT_FAILED: 'SHARDCRON_ZK_CONNECT_FAILED',
  /** A fenced multi's check failed: the fencing node changed or vanished, so the writer lost its authority. */
  ZK_FENCE_LOST: 'SHARDCRON_ZK_FENCE_LOST',
  ZK_OTHER: 'SHARDCRON_ZK_OTHER',
} as const;

/** Union of every error code. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** One problem found while validating input: where it is and what is wrong with it. */
export interface FieldIssue {
  /** Dotted path of the offending field, or the environment variable name. */
  field: string;
  message: string;
}

/** Base class of every error shardcron raises on purpose. */
export class ShardcronError extends Error {
  readonly code: ErrorCode;
  /** Structured context for logs (job, item, path, field...). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ShardcronError';
    this.code = code;
    this.details = Object.freeze({ ...details });
  }
}

/** Input failed validation; `issues` names every offending field. */
export class ConfigError extends ShardcronError {
  readonly issues: readonly FieldIssue[];

  constructor(code: ErrorCode, subject: string, issues: FieldIssue[], details: Record<string, unknown> = {}) {
    const list = issues.map((i) => `  - ${i.field}: ${i.message}`).join('\n');
    super(code, `${subject}:\n${list}`, { ...details, issues });
    this.name = 'ConfigError';
    this.issues = Object.freeze(issues.slice());
  }
}

/** True when `err` is a ShardcronError with the given code. */
export function hasCode(err: unknown, code: ErrorCode): err is ShardcronError {
  return err instanceof ShardcronError && err.code === code;
}
