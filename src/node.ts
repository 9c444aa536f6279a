import { createRedisClient } from './shared/redis/redis-connection';
import { redisTarget, type RedisTarget } from './shared/redis/redis-target';
import { itemLockModeOf, settleItemLockMode } from './shared/registry/item-lock-mode';
import { queuePrefix } from './shared/registry/queue-names';
import { loadJobsModule } from './jobs-module';
import { LeaderService } from './leader/leader-service';
import type { ConsoleRole } from './ops/console-role';
import { loadEnvConfig, type Role, type ShardcronEnvConfig } from './shared/config/env-config';
import type { ResolvedJobDefinition } from './shared/config/job-definition';
import { applyHeapGrowth, defaultHeapGrowthPercent } from './shared/heap-growth';
import { closeStep } from './shared/close-step';
import { createLogger, type Logger } from './shared/logger';
import { ZkClient } from './shared/zk';
import { detectIp } from './worker/instance-registration';
import { WorkerService } from './worker/worker-service';

/** Options of {@link startNode}; each one overrides the matching SHARDCRON_* variable. */
export interface StartNodeOptions {
  roles?: readonly Role[];
  /** Job definitions this node's worker role can run (and registers). */
  jobs?: readonly ResolvedJobDefinition[];
  /** Environment to read; default `process.env`. */
  env?: Record<string, string | undefined>;
  zk?: string;
  zkSessionTimeoutMs?: number;
  zkDigest?: { user: string; password: string };
  namespace?: string;
  /** Replaces SHARDCRON_REDIS_URL; SHARDCRON_REDIS_CLUSTER_NODES or SHARDCRON_REDIS_SENTINELS still apply. */
  redisUrl?: string;
  /** The whole Redis target (URL, Cluster nodes or Sentinels); wins over `redisUrl` and the environment. */
  redis?: RedisTarget;
  instanceId?: string;
  /** The IP this instance registers under (default: first non-internal IPv4). */
  ip?: string;
  concurrency?: number;
  /** Requests a worker takes beyond its concurrency (SHARDCRON_PREFETCH; default: ten per unit of concurrency, at most 1000). */
  prefetch?: number;
  /**
   * monitorExecution's lock: true a lease kept across fires, false per run (SHARDCRON_ITEM_LEASE).
   * Unset: the one the namespace records (a lease in a new namespace); one that differs from it
   * stops the worker role's start with an error.
   */
  itemLease?: boolean;
  /** The scheduler next in line loads every job before a takeover (SHARDCRON_WARM_STANDBY; default true). */
  warmStandby?: boolean;
  /**
   * Scheduler role: how long no live instance has an address before the leader removes that
   * address's `servers/{ip}` nodes that say ENABLED (SHARDCRON_SERVER_RETENTION_MS; default 10 minutes).
   */
  serverRetentionMs?: number;
  /** On close, how long running executions may take before they are aborted. */
  shutdownGraceMs?: number;
  /** V8's heap growing percent for this process (SHARDCRON_HEAP_GROWTH_PERCENT); 0 keeps V8's policy; unset: 50 with the scheduler role, else 30. */
  heapGrowthPercent?: number;
  /** The console role's address and tokens; each field replaces its SHARDCRON_OPS_* variable. Port 0: any free port. */
  ops?: { host?: string; port?: number; token?: string; readToken?: string };
  logger?: Logger;
}

/** A running shardcron process: its roles and one idempotent `close()`. */
export interface ShardcronNode {
  readonly instanceId: string;
  readonly config: ShardcronEnvConfig;
  readonly zk: ZkClient;
  /** Present with the scheduler role. */
  readonly leader: LeaderService | undefined;
  /** Present with the worker role. */
  readonly worker: WorkerService | undefined;
  /** Present with the console role: its `url`, metrics and admin. */
  readonly console: ConsoleRole | undefined;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts a node with the given roles. Configuration comes from SHARDCRON_* variables, validated
 * at once (one error naming every bad variable), then from `options`, which win. Resolves once
 * every role is up; a worker is then registered (the leader gives it items), while it may still be
 * reading its jobs' stored configs, which a run waits for.
 */
export async function startNode(options: StartNodeOptions = {}): Promise<ShardcronNode> {
  const env = loadEnvConfig(options.env ?? process.env);
  const roles = options.roles ?? env.roles;
  const logger = options.logger ?? createLogger({ level: env.logLevel });
  const ip = options.ip ?? detectIp();
  const instanceId = options.instanceId ?? env.instanceId ?? `${ip}@-@${process.pid}`;
  const namespace = options.namespace ?? env.namespace;
  const log = logger.child({ ns: namespace, instanceId });
  const heap = applyHeapGrowth(options.heapGrowthPercent ?? env.heapGrowthPercent ?? defaultHeapGrowthPercent(roles));
  if (heap.kind === 'node-flag') log.debug({ flag: heap.flag }, 'heap growth left to the node flag');
  const cleanups: Array<{ step: string; run: () => Promise<unknown> }> = [];
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // Reverse order of start; each cleanup runs even if an earlier one failed.
      log.debug({ steps: cleanups.map((c) => c.step).reverse() }, 'closing the node');
      for (const { step, run } of cleanups.reverse()) await closeStep(step, run, log);
      log.info('node closed');
    })());

  try {
    const zk = await new ZkClient({
      connectionString: options.zk ?? env.zk.connectionString,
      namespace,
      sessionTimeoutMs: options.zkSessionTimeoutMs ?? env.zk.sessionTimeoutMs,
      connectTimeoutMs: env.zk.connectTimeoutMs,
      retry: { baseSleepMs: env.zk.baseSleepMs, maxSleepMs: env.zk.maxSleepMs, maxRetries: env.zk.maxRetries },
      digest: options.zkDigest ?? env.zk.digest,
      logger: log,
    }).start();
    cleanups.push({ step: 'zookeeper', run: () => zk.close() });
    const redis = options.redis ?? { ...redisTarget(env), url: options.redisUrl ?? env.redisUrl };

    let worker: WorkerService | undefined;
    if (roles.includes('worker')) {
      // `jobs` given in code win; else the module SHARDCRON_JOBS names, as `shardcron start` loads it.
      const jobs = options.jobs ?? (env.jobsModule !== undefined ? await loadJobsModule(env.jobsModule) : []);
      const prefetch = options.prefetch ?? env.prefetch;
      const generic = env.workerGeneric;
      if (jobs.length === 0 && generic.length === 0) log.warn('worker role without jobs: this node will run nothing (give it a jobs module, or SHARDCRON_WORKER_GENERIC)');
      // Every worker of a namespace uses the lock it records (docs/design-notes.md, "The namespace's item lock").
      const itemLock = await settleItemLockMode(zk, itemLockModeOf(options.itemLease ?? env.itemLease), log);
      worker = new WorkerService({
        zk,
        redis,
        namespace,
        instanceId,
        ip,
        jobs,
        concurrency: options.concurrency ?? env.concurrency,
        ...(prefetch !== undefined && { prefetch }),
        ...(env.consumers !== undefined && { consumers: env.consumers }),
        yieldBeforeFireMs: env.yieldBeforeFireMs,
        itemLease: itemLock === 'lease',
        shutdownGraceMs: options.shutdownGraceMs ?? env.shutdownGraceMs,
        history: { recentPerJob: env.historyRecent, ...(env.tracingPgUrl !== undefined && { tracingPgUrl: env.tracingPgUrl }) },
        generic,
        logger: log,
      });
      cleanups.push({ step: 'worker', run: () => worker!.close() });
      await worker.start();
    }

    let leader: LeaderService | undefined;
    if (roles.includes('scheduler')) {
      const connection = createRedisClient(redis, { logger: log, name: 'leader' });
      cleanups.push({ step: 'leader redis connection', run: () => connection.quit() });
      leader = new LeaderService({ zk, redis: connection, namespace, queuePrefix: queuePrefix(namespace, redis), completedKept: env.completedKept, instanceId, logger: log, warmStandby: options.warmStandby ?? env.warmStandby, serverRetentionMs: options.serverRetentionMs ?? env.serverRetentionMs });
      cleanups.push({ step: 'scheduler', run: () => leader!.close() });
      await leader.start();
    }
    let consoleRole: ConsoleRole | undefined;
    if (roles.includes('console')) {
      const ops = options.ops ?? {};
      const token = ops.token ?? env.ops.token;
      const readToken = ops.readToken ?? env.ops.readToken;
      // Loaded only for the console role: fastify, Bull Board and prom-client add about 20 MB to a
      // process's RSS (18-20 MB measured on the resident set of a bare `require`), which a worker-only
      // or scheduler-only process never uses. `require`, not `import()`: run from the sources through
      // tsx, a dynamic import goes to Node's ESM resolver, which finds no extensionless .ts file.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { ConsoleRole } = require('./ops/console-role') as typeof import('./ops/console-role');
      consoleRole = new ConsoleRole({
        zk,
        redis,
        namespace,
        host: ops.host ?? env.ops.host,
        port: ops.port ?? env.ops.port,
        tokens: { ...(token !== undefined && { admin: token }), ...(readToken !== undefined && { read: readToken }) },
        ...(env.tracingPgUrl !== undefined && { tracingPgUrl: env.tracingPgUrl }),
        ...(leader && { leader }),
        ...(worker && { worker }),
        logger: log,
      });
      // Closed first: it stops answering before the roles it reports on go.
      cleanups.push({ step: 'console', run: () => consoleRole!.close() });
      await consoleRole.start();
    }

    log.info({ roles, ip }, 'node started');
    return { instanceId, config: env, zk, leader, worker, console: consoleRole, close, [Symbol.asyncDispose]: close };
  } catch (err) {
    await close();
    throw err;
  }
}

