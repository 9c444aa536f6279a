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
  jobs list              The jobs of the namespace: status, cron, items, instances, next and last fire.
  jobs show NAME         One job: its status, stored config and each item's status and instance.
  jobs create --file JOB.json
                         Store a SCRIPT or HTTP job defined by data; generic workers run it.
  jobs trigger NAME      Run every enabled item of the job once now (the leader dispatches it).
  jobs disable|enable NAME [--item I]
                         Stop or resume firing the job, or only its sharding item I.
  jobs remove NAME       Delete the job from ZooKeeper and its queued requests from Redis.
  servers disable|enable IP
                         Give no items to (or again to) the instances on that IP, in every job.
  instances              The live worker instances and their jobs.
  item-lock [lease|per-run] [--force]
                         Show monitorExecution's lock in the namespace, or switch it while no worker
                         runs (--force: even so; each worker keeps the lock it started with).
  help                   Print this text.

The jobs, servers, instances and item-lock commands print tables or sentences; --json prints the console API's JSON.
They connect with the SHARDCRON_* variables (3 s to reach ZooKeeper unless
SHARDCRON_ZK_CONNECT_TIMEOUT_MS says otherwise).

Exit codes: 0 success, 1 failure (a server unreachable, a disabled job triggered), 2 invalid
environment, jobs module or usage, 3 job, item or server not found.
Documentation: docs/cli.md, docs/configuration.md, docs/examples.md`;

/** Commands that are planned: named in the help and refused with a clear message. None at the moment. */
export const PLANNED_COMMANDS: ReadonlySet<string> = new Set<string>();
