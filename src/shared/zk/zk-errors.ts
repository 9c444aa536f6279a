import { ErrorCodes, ShardcronError, type ErrorCode } from '../errors';
import { withoutStack } from './driver/stackless-exceptions';

/** ZooKeeper's numeric result codes (org.apache.zookeeper.KeeperException.Code) that we name. */
const ZK_CODES: Readonly<Record<number, ErrorCode>> = {
  [-4]: ErrorCodes.ZK_CONNECTION_LOSS,
  [-7]: ErrorCodes.ZK_OPERATION_TIMEOUT,
  [-8]: ErrorCodes.ZK_BAD_ARGUMENTS,
  [-101]: ErrorCodes.ZK_NO_NODE,
  [-102]: ErrorCodes.ZK_NO_AUTH,
  [-103]: ErrorCodes.ZK_BAD_VERSION,
  [-108]: ErrorCodes.ZK_NO_CHILDREN_FOR_EPHEMERALS,
  [-110]: ErrorCodes.ZK_NODE_EXISTS,
  [-111]: ErrorCodes.ZK_NOT_EMPTY,
  [-112]: ErrorCodes.ZK_SESSION_EXPIRED,
  [-114]: ErrorCodes.ZK_INVALID_ACL,
  [-115]: ErrorCodes.ZK_AUTH_FAILED,
};

/**
 * Answers that are ordinary outcomes, which callers branch on (a flag node that is absent, a create
 * that lost a race, a version that moved on): their errors are built without a stack trace, which
 * would only show the callback the answer came through and cost more than the rest of the read
 * (driver/stackless-exceptions.ts has the measurement).
 */
const OUTCOMES: ReadonlySet<ErrorCode> = new Set([ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_NODE_EXISTS, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NOT_EMPTY]);

/** Codes after which the same request may succeed on a retry (Curator's RetryLoop set). */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set([ErrorCodes.ZK_CONNECTION_LOSS, ErrorCodes.ZK_OPERATION_TIMEOUT]);

/** A failed ZooKeeper operation: `code` is the named code, `zkCode` the server's number. */
export class ZkError extends ShardcronError {
  readonly zkCode: number;
  readonly path: string | undefined;

  constructor(code: ErrorCode, zkCode: number, op: string, path: string | undefined, extra: Record<string, unknown> = {}, cause?: unknown) {
    super(code, `ZooKeeper ${op}${path ? ` ${path}` : ''} failed: ${code.replace('SHARDCRON_ZK_', '')} (${zkCode})`, { op, path, zkCode, ...extra }, { cause });
    this.name = 'ZkError';
    this.zkCode = zkCode;
    this.path = path;
  }
}

/** Extracts the numeric code from whatever node-zookeeper-client handed back. */
function numericCode(err: unknown): number | undefined {
  if (err && typeof err === 'object') {
    const e = err as { getCode?: () => number; code?: unknown };
    if (typeof e.getCode === 'function') return e.getCode();
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

/** The one place that turns client exceptions into {@link ZkError}s. */
export function toZkError(err: unknown, op: string, path?: string, extra: Record<string, unknown> = {}): ZkError {
  if (err instanceof ZkError) return err;
  const zkCode = numericCode(err);
  const code = (zkCode !== undefined && ZK_CODES[zkCode]) || ErrorCodes.ZK_OTHER;
  const make = () => new ZkError(code, zkCode ?? 0, op, path, extra, err);
  return OUTCOMES.has(code) ? withoutStack(make) : make();
}

/** Maps a raw numeric code (as found in multi results) to a named code. */
export function namedZkCode(zkCode: number): ErrorCode {
  return ZK_CODES[zkCode] ?? ErrorCodes.ZK_OTHER;
}

/** True when retrying the same request may succeed. */
export function isRetryable(err: unknown): boolean {
  return err instanceof ShardcronError && RETRYABLE.has(err.code);
}
