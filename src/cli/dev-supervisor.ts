/**
 * The supervisor of `shardcron dev` (see dev-command.ts): finds or starts ZooKeeper and Redis, runs
 * one scheduler and N workers on the example jobs, prints their executions as a human log, and on
 * SIGTERM stops everything it started, in order, leaving no process, port or temp dir behind.
 */
import path from 'node:path';
import { makeTempDir } from '../dev/child-service';
import { loadJobsModule } from '../jobs-module';
import { loadEnvConfig, type ShardcronEnvConfig } from '../shared/config/env-config';
import { ShardcronError } from '../shared/errors';
import { DevCluster } from './dev-cluster';
import { describeDevConsole, devConsole } from './dev-console';
import type { DevOptions } from './dev-options';
import { clockTime, DevLogRenderer } from './dev-log';
import { startHaServices } from './dev-ha-services';
import { DevAbort, ensureDevServices, type DevServices } from './dev-services';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';
import { PACKAGE_ROOT, SHARDCRON_BIN } from './package-root';

/** The jobs dev runs (docs/examples.md). */
export const EXAMPLE_JOBS = path.join(PACKAGE_ROOT, 'examples', 'jobs.ts');
/** Session timeout of dev's nodes: a killed worker's items fail over within a few seconds. */
const SESSION_TIMEOUT_MS = 4_000;
/** How long a node may take to finish its executions on stop before it is killed. */
const NODE_GRACE_MS = 5_000;

/** Resolves on the first SIGINT/SIGTERM; calls `onSecond` on the next one. */
function watchSignals(onSecond: () => void): { received: () => boolean; first: Promise<NodeJS.Signals> } {
  let count = 0;
  let resolveFirst!: (signal: NodeJS.Signals) => void;
  const first = new Promise<NodeJS.Signals>((resolve) => (resolveFirst = resolve));
  const handler = (signal: NodeJS.Signals) => {
    count += 1;
    if (count === 1) resolveFirst(signal);
    else onSecond();
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return { received: () => count > 0, first };
}

/** Runs the supervisor until a stop signal; resolves with the exit code. */
export async function runDevSupervisor(options: Required<DevOptions>, io: CliIo): Promise<ExitCode> {
  const print = (line: string) => io.out(line);
  // With the terminal gone, writes fail (EIO, EPIPE); the cleanup must still run.
  process.stdout.on('error', () => undefined);
  let config: ShardcronEnvConfig;
  let jobNames: string[];
  try {
    // dev gives each of its nodes its roles; the console's token is generated when its address needs one.
    config = loadEnvConfig({ ...io.env, SHARDCRON_ROLES: 'scheduler,worker' });
    jobNames = (await loadJobsModule(EXAMPLE_JOBS)).map((job) => job.name);
  } catch (err) {
    if (!(err instanceof ShardcronError)) throw err;
    io.err(err.message);
    return ExitCode.USAGE;
  }

  const temp = makeTempDir('shardcron-dev-');
  let services: DevServices | undefined;
  let cluster: DevCluster | undefined;
  const signals = watchSignals(() => {
    print(`${clockTime(Date.now())}  second signal: killing everything now`);
    // SIGKILL the nodes now; exiting runs src/dev's exit hook, which kills the servers and removes temp dirs.
    void cluster?.kill();
    process.exit(ExitCode.FAILURE);
  });

  try {
    print(`shardcron dev: a local cluster with 1 scheduler and ${options.workers} worker${options.workers > 1 ? 's' : ''} (supervisor pid ${process.pid})`);
    const serviceOptions = { config, env: io.env, noInstall: options.noInstall, tempDir: temp.root, print };
    if (options.ha) {
      print('Starting a ZooKeeper ensemble of 3 and a Redis primary, replica and 3 Sentinels (--ha)...');
      services = await startHaServices(serviceOptions);
    } else {
      print('Looking for ZooKeeper and Redis...');
      services = await ensureDevServices(serviceOptions);
    }
    if (signals.received()) return await stopAll(print, services, cluster, temp.remove);
    const namespace = io.env.SHARDCRON_NAMESPACE ? config.namespace : services.local ? 'dev' : `dev-${Date.now().toString(36)}`;
    const jobsPath = path.relative(process.cwd(), EXAMPLE_JOBS) || EXAMPLE_JOBS;
    services.describe().forEach(print);
    print(`  ${'namespace'.padEnd(10)} ${namespace}  (ZooKeeper /${namespace}; Redis BullMQ queues shardcron:${namespace}.*)`);
    print(`  ${'jobs'.padEnd(10)} ${jobsPath}: ${jobNames.join(', ')}  (docs/examples.md)`);
    const consoleAt = await devConsole(config, io.env);
    print(`  ${'console'.padEnd(10)} ${describeDevConsole(consoleAt)}`);
    if (services.dataDir) print(`  ${'data'.padEnd(10)} ${services.dataDir}  (removed on stop)`);

    const renderer = new DevLogRenderer({ launchedAt: options.launchedAt, jobNames });
    cluster = new DevCluster({
      bin: SHARDCRON_BIN,
      baseEnv: io.env,
      onLine: (name, line) => renderer.render(name, line, Date.now()).forEach(print),
      onExit: (name, pid, how, expected) => {
        if (!expected) print(`${clockTime(Date.now())}  ${name} (pid ${pid}) ${how} unexpectedly; the rest of the cluster carries on`);
      },
    });
    const common = {
      ...services.nodeEnv,
      SHARDCRON_NAMESPACE: namespace,
      SHARDCRON_ZK_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      SHARDCRON_SHUTDOWN_GRACE_MS: String(NODE_GRACE_MS),
      SHARDCRON_LOG_LEVEL: 'info',
    };
    // An empty value counts as unset: a SHARDCRON_JOBS of the caller's is not the scheduler's business.
    // The scheduler serves the console too: one process fewer, and the console's metrics show the leader's fires.
    cluster.start({ name: 'scheduler-1', env: { ...common, ...consoleAt.env, SHARDCRON_ROLES: 'scheduler,console', SHARDCRON_INSTANCE_ID: 'scheduler-1', SHARDCRON_JOBS: '' } });
    for (let i = 1; i <= options.workers; i += 1) {
      const name = `worker-${i}`;
      cluster.start({ name, env: { ...common, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: name, SHARDCRON_JOBS: EXAMPLE_JOBS } });
    }
    print(`  ${'processes'.padEnd(10)} ${cluster.members.map((m) => `${m.name} pid ${m.pid}`).join(', ')}`);
    print(`  ${'stop'.padEnd(10)} Ctrl-C stops everything started here`);
    print('');
    await signals.first;
    return await stopAll(print, services, cluster, temp.remove);
  } catch (err) {
    if (err instanceof DevAbort) {
      temp.remove();
      return err.exitCode;
    }
    print(`shardcron dev failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    await stopAll(print, services, cluster, temp.remove);
    return ExitCode.FAILURE;
  }
}

/** Nodes first (scheduler, then workers), then the servers started here, then the temp dir. */
async function stopAll(print: (line: string) => void, services: DevServices | undefined, cluster: DevCluster | undefined, removeTemp: () => void): Promise<ExitCode> {
  print(`${clockTime(Date.now())}  stopping: ${[cluster && 'nodes', services?.zookeeper.startedHere && 'zookeeper', services?.redis.startedHere && 'redis'].filter(Boolean).join(', ') || 'nothing started yet'}`);
  try {
    await cluster?.stop(2 * NODE_GRACE_MS, (name) => name.startsWith('scheduler'));
    await services?.close();
  } finally {
    removeTemp();
  }
  print(`${clockTime(Date.now())}  stopped; nothing started by shardcron dev is left running`);
  return ExitCode.OK;
}
