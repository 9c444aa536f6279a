/**
 * How the admin commands (`jobs`, `servers`, `instances`) connect, and how their failures become
 * exit codes: one place, so every command answers alike.
 */
import pino from 'pino';
import { openAdmin, type Admin, type OpenAdminOptions } from '../admin';
import { LOG_LEVELS } from '../shared/config/env-config';
import { ErrorCodes, ShardcronError, type ErrorCode } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/**
 * Connect timeout of the admin commands when SHARDCRON_ZK_CONNECT_TIMEOUT_MS is not set: a person
 * waiting at a prompt, or a script, should hear within seconds that ZooKeeper does not answer,
 * where a node rather waits (15 s, retried) for a ZooKeeper that is starting.
 */
export const CLI_CONNECT_TIMEOUT_MS = 3_000;

/** Exit code of each error an admin command reports on purpose; any other error is a failure (1). */
const EXIT_CODES: Partial<Record<ErrorCode, ExitCode>> = {
  [ErrorCodes.INVALID_CONFIG]: ExitCode.USAGE,
  [ErrorCodes.JOB_NOT_FOUND]: ExitCode.NOT_FOUND,
  [ErrorCodes.NOT_FOUND]: ExitCode.NOT_FOUND,
};

/** The exit code for `err`: 2 bad input, 3 not found, 1 anything else (unreachable servers, a refused trigger, corrupt data). */
export function exitCodeOf(err: unknown): ExitCode {
  return (err instanceof ShardcronError && EXIT_CODES[err.code]) || ExitCode.FAILURE;
}

/** Logs go to stderr (stdout is the command's output) and only when SHARDCRON_LOG_LEVEL asks for them. */
function cliLogger(env: NodeJS.ProcessEnv): Logger {
  // An invalid level is left to the environment's validation, which names it (exit 2).
  const level = LOG_LEVELS.find((l) => l === env.SHARDCRON_LOG_LEVEL);
  return level ? pino({ level }, pino.destination(2)) : silentLogger;
}

/**
 * Opens an admin configured by the SHARDCRON_* variables of `io.env`, runs `body`, closes the admin
 * and returns the body's exit code. An error is printed as `{label}: {message}` on stderr and
 * becomes its exit code ({@link exitCodeOf}). Without SHARDCRON_ZK_CONNECT_TIMEOUT_MS and
 * SHARDCRON_ZK_MAX_RETRIES, ZooKeeper gets one attempt of {@link CLI_CONNECT_TIMEOUT_MS}.
 */
export async function withAdmin(io: CliIo, label: string, body: (admin: Admin) => Promise<ExitCode>, readModel?: OpenAdminOptions['readModel']): Promise<ExitCode> {
  let admin: Admin | undefined;
  try {
    admin = await openAdmin({
      env: io.env,
      logger: cliLogger(io.env),
      readModel,
      ...(io.env.SHARDCRON_ZK_CONNECT_TIMEOUT_MS ? {} : { connectTimeoutMs: CLI_CONNECT_TIMEOUT_MS }),
      ...(io.env.SHARDCRON_ZK_MAX_RETRIES ? {} : { zkRetries: 0 }),
    });
    return await body(admin);
  } catch (err) {
    io.err(`${label}: ${err instanceof Error ? err.message : String(err)}`);
    return exitCodeOf(err);
  } finally {
    await admin?.close();
  }
}
