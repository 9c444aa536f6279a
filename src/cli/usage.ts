/** The help text of the `shardcron` binary. Kept in step with docs/cli.md. */
export const USAGE = `Usage: shardcron <command> [options]

Sharded cron jobs for Node.js: ZooKeeper elects a leader that assigns sharding items to workers
and enqueues them on BullMQ (Redis).

Commands:
  start                  Run a node configured by SHARDCRON_* variables: roles from SHARDCRON_ROLES,
                         jobs from the module SHARDCRON_JOBS names. Logs JSON lines to stdout.
                         SIGTERM/SIGINT stop it cleanly (exit 0); a second signal forces exit 1.
  dev [--workers N] [--no-install] [--ha]
                         A local cluster on this machine: ZooKeeper and Redis (started here when none
                         answer at SHARDCRON_ZK / SHARDCRON_REDIS_URL), one scheduler and N workers
                         (default 3) running the example jobs, with a readable live log. Ctrl-C stops
                         everything it started. --no-install: never apt-get install a missing server.
                         --ha: a ZooKeeper ensemble of 3 and a Redis primary, replica and 3 Sentinels,
                         all started here, to try killing one of them.
  ping                   Check that ZooKeeper and Redis answer within SHARDCRON_ZK_CONNECT_TIMEOUT_MS
                         (exit 0) or say which one does not (exit 1). For health checks.
  env                    Print every SHARDCRON_* variable with its default and meaning.
  help                   Print this text.

Planned (not available yet):
  jobs list|show|trigger|disable|enable|remove NAME
                         Inspect and operate jobs.
  instances              List live worker instances.

Exit codes: 0 success, 1 failure, 2 invalid environment, jobs module or usage.
Documentation: docs/cli.md, docs/configuration.md, docs/examples.md`;

/** Commands that are planned: named in the help and refused with a clear message. */
export const PLANNED_COMMANDS: ReadonlySet<string> = new Set(['jobs', 'instances']);
