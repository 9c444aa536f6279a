/** Exit codes of the `shardcron` binary (docs/cli.md). */
export const ExitCode = {
  /** Done, or stopped cleanly by SIGTERM/SIGINT. */
  OK: 0,
  /** A runtime failure: a server unreachable, a start that failed, a refused operation (a disabled job's trigger), an uncaught error, a forced stop. */
  FAILURE: 1,
  /** Bad input: invalid SHARDCRON_* environment, jobs module or command-line usage. Fix and retry. */
  USAGE: 2,
  /** What the command names does not exist: a job, a sharding item, a server IP. */
  NOT_FOUND: 3,
} as const;

/** One of {@link ExitCode}'s values. */
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
