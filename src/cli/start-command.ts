/**
 * `shardcron start`: one node, configured only by SHARDCRON_* variables, logging JSON lines to stdout.
 * Its executions are logged (`item finished` at info, `item started` at debug) in the shape
 * `shardcron dev` and log shippers read: {job, item, fireTime, instanceId, source, status, durationMs}.
 */
import { loadJobsModule } from '../jobs-module';
import { startNode, type ShardcronNode } from '../node';
import { loadEnvConfig, type ShardcronEnvConfig } from '../shared/config/env-config';
import { ConfigError, ErrorCodes, ShardcronError } from '../shared/errors';
import type { ResolvedJobDefinition } from '../shared/config/job-definition';
import { createLogger, type Logger } from '../shared/logger';
import { parseShardingItemParameters } from '../shared/sharding/sharding-item-parameters';
import type { ExecutionEvent } from '../worker/item-executor';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** How long past SHUTDOWN_GRACE_MS a close may take before the process gives up on it. */
const CLOSE_MARGIN_MS = 10_000;

/** Env and jobs module, validated; a usage error (exit 2) prints what is wrong. */
async function loadConfiguration(io: CliIo): Promise<{ config: ShardcronEnvConfig; jobs: ResolvedJobDefinition[] } | undefined> {
  try {
    const config = loadEnvConfig(io.env);
    return { config, jobs: config.jobsModule === undefined ? [] : await loadJobsModule(config.jobsModule) };
  } catch (err) {
    if (!(err instanceof ShardcronError && err.code === ErrorCodes.INVALID_CONFIG)) throw err;
    io.err(err instanceof ConfigError || !(err.cause instanceof Error) ? err.message : `${err.message}\n${err.cause.stack ?? ''}`);
    return undefined;
  }
}

/** Logs every execution of the node's worker; durations are measured from the matching start. */
function logExecutions(node: ShardcronNode, jobs: readonly ResolvedJobDefinition[], log: Logger): void {
  const worker = node.worker;
  if (!worker) return;
  // Total and parameter come from this process's definitions: a config changed in ZooKeeper since
  // may differ, but the log line is for people reading it, not for the scheduler.
  const byName = new Map(jobs.map((job) => [job.name, { total: job.shardingTotalCount, parameters: parseShardingItemParameters(job.shardingItemParameters) }]));
  const startedAt = new Map<string, number>();
  const key = (r: ExecutionEvent) => `${r.job}|${r.fireTime}|${r.item}|${r.source}`;
  const fields = (r: ExecutionEvent) => {
    const definition = byName.get(r.job);
    const parameter = definition?.parameters[r.item];
    return {
      job: r.job, item: r.item, fireTime: r.fireTime, instanceId: r.instanceId, source: r.source,
      ...(definition && { shardingTotalCount: definition.total }),
      ...(parameter && { shardingParameter: parameter }),
    };
  };
  worker.on('item:started', (r) => {
    startedAt.set(key(r), r.at);
    log.debug(fields(r), 'item started');
  });
  worker.on('item:finished', (r) => {
    const started = startedAt.get(key(r));
    startedAt.delete(key(r));
    const durationMs = started === undefined ? 0 : r.at - started;
    log.info({ ...fields(r), status: r.status, durationMs, ...(r.reason && { reason: r.reason }) }, 'item finished');
  });
}

function logLeadership(node: ShardcronNode, log: Logger): void {
  const leader = node.leader;
  if (!leader) return;
  // The election may have been won before startNode returned; log each epoch once either way.
  let logged: number | undefined;
  const acquired = (epoch: number) => {
    if (epoch === logged) return;
    logged = epoch;
    log.info({ epoch }, 'leadership acquired');
  };
  leader.on('leader:elected', ({ epoch }) => acquired(epoch));
  leader.on('leader:lost', ({ epoch, reason }) => log[reason === 'closed' ? 'info' : 'warn']({ epoch, reason }, 'leadership lost'));
  if (leader.isLeader && leader.election.epoch !== undefined) acquired(leader.election.epoch);
}

/**
 * Runs the node until SIGTERM or SIGINT, then closes it. Resolves with the exit code: 0 after a
 * clean close, 1 when the start or the close failed, on an uncaught error or a second signal,
 * 2 for an invalid environment or jobs module.
 */
export async function runStart(io: CliIo): Promise<ExitCode> {
  const loaded = await loadConfiguration(io);
  if (!loaded) return ExitCode.USAGE;
  const { config, jobs } = loaded;
  const logger = createLogger({ level: config.logLevel });
  const log = logger.child({ component: 'cli', ns: config.namespace });

  return new Promise<ExitCode>((resolve) => {
    let node: Promise<ShardcronNode | undefined> | undefined;
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting at once, without a clean shutdown');
        return resolve(ExitCode.FAILURE);
      }
      stopping = true;
      log.info({ signal }, 'shutting down');
      const limitMs = config.shutdownGraceMs + CLOSE_MARGIN_MS;
      setTimeout(() => {
        log.error({ limitMs }, 'shutdown did not finish in time; exiting');
        resolve(ExitCode.FAILURE);
      }, limitMs).unref();
      void node?.then((n) => n?.close()).then(
        () => resolve(ExitCode.OK),
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          resolve(ExitCode.FAILURE);
        },
      );
    };
    const onUncaught = (err: unknown) => {
      log.fatal({ err }, 'uncaught error; exiting');
      resolve(ExitCode.FAILURE);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);

    node = startNode({ env: io.env, jobs, logger }).then(
      (started) => {
        logExecutions(started, jobs, logger.child({ component: 'cli', ns: config.namespace, instanceId: started.instanceId }));
        logLeadership(started, log.child({ instanceId: started.instanceId }));
        return started;
      },
      (err: unknown) => {
        log.fatal({ err }, 'could not start the node');
        resolve(ExitCode.FAILURE);
        return undefined;
      },
    );
  });
}
