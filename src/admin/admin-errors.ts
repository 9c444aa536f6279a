/**
 * The errors the admin layer raises about what an operator named, each with its stable code: the
 * console maps them to HTTP statuses (404, 409) and the CLI to exit codes (3, 1).
 */
import { ConfigError, ErrorCodes, ShardcronError } from '../shared/errors';

/** JOB_NOT_FOUND: no job `job` in the namespace (`why` says more, e.g. that it has no config). */
export function jobNotFound(job: string, why?: string): ShardcronError {
  return new ShardcronError(ErrorCodes.JOB_NOT_FOUND, `Job ${JSON.stringify(job)} not found${why ? `: ${why}` : ''}`, { job });
}

/** NOT_FOUND: an item, a server or an instance that does not exist. */
export function notFound(message: string, details: Record<string, unknown>): ShardcronError {
  return new ShardcronError(ErrorCodes.NOT_FOUND, message, details);
}

/** CONFLICT: concurrent changes kept winning over this operation; running it again is safe. */
export function conflict(message: string, details: Record<string, unknown>): ShardcronError {
  return new ShardcronError(ErrorCodes.CONFLICT, message, details);
}

/**
 * A sharding item number as an operator gives it: a non-negative integer (a number, or the decimal
 * text the CLI and HTTP paths carry). Throws a ConfigError naming `field` otherwise.
 */
export function parseItemNumber(value: unknown, field = 'item'): number {
  const item = typeof value === 'string' && /^(0|[1-9]\d{0,8})$/.test(value) ? Number(value) : value;
  if (typeof item === 'number' && Number.isSafeInteger(item) && item >= 0) return item;
  throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid sharding item', [
    { field, message: `${JSON.stringify(value) ?? String(value)} is not a sharding item number: expected an integer from 0 to shardingTotalCount - 1` },
  ]);
}
