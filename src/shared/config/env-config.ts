/**
 * The environment: every `SHARDCRON_*` variable, its default, its validation and its documentation,
 * in one place. {@link loadEnvConfig} is the only reader of `process.env` in the code base; everything
 * else receives the typed, frozen {@link ShardcronEnvConfig} it returns.
 */
import { z } from 'zod';
import {
  didYouMean,
  integer,
  isLoopbackHost,
  oneOf,
  parseDigest,
  parseFilePath,
  parseInstanceId,
  parseJobsModule,
  parseNamespace,
  parseOpsHost,
  parseOpsToken,
  parseHostPortList,
  parsePostgresUrl,
  parseSentinelName,
  parseRedisUrl,
  parseZk,
  quote,
  shortTokenIssues,
  subsetOf,
  type Parsed,
  type ZkServer,
} from './env-values';
import { ConfigError, ErrorCodes, type FieldIssue } from '../errors';
import { toFieldIssues } from '../validation';

/** Roles a process can take (DESIGN.md "Processes and roles"), in their canonical order. */
export const ROLES = Object.freeze(['scheduler', 'worker', 'console'] as const);
/** One process role. */
export type Role = (typeof ROLES)[number];

/** pino levels accepted by SHARDCRON_LOG_LEVEL. */
export const LOG_LEVELS = Object.freeze(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const);
/** One log level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

// The console's bind rule (SHARDCRON_OPS_HOST vs SHARDCRON_OPS_TOKEN) is checked here and by its callers.
export { isLoopbackHost };

export type { ZkServer };

/** The validated environment. Deeply frozen; optional fields are absent (not `undefined`) when unset. */
export interface ShardcronEnvConfig {
  readonly zk: {
    /** Normalised `host:port,host:port` (IPv6 hosts bracketed), without chroot. */
    readonly connectionString: string;
    /** The same list, parsed. */
    readonly servers: readonly ZkServer[];
    readonly sessionTimeoutMs: number;
    readonly connectTimeoutMs: number;
    /** Retry back-off of failed ZooKeeper operations (ElasticJob's registry-center settings). */
    readonly baseSleepMs: number;
    readonly maxSleepMs: number;
    readonly maxRetries: number;
    /** Digest credentials; a secret, never log it. */
    readonly digest?: { readonly user: string; readonly password: string };
  };
  /** ZooKeeper chroot (`/{namespace}`) and Redis key prefix. */
  readonly namespace: string;
  /** Redis URL; may carry a password, never log it unredacted. */
  readonly redisUrl: string;
  /** Distinct roles, in canonical order. */
  readonly roles: readonly Role[];
  /** Path of a jobs module, as given. */
  readonly jobsModule?: string;
  /** Executions run at once per worker instance. */
  readonly concurrency: number;
  /** Requests a worker instance takes beyond its concurrency; unset: ten per unit of concurrency, at most 1000. */
  readonly prefetch?: number;
  /** BullMQ consumers the requests a worker takes at once are split over; unset: one per 4, at most 64. */
  readonly consumers?: number;
  /** How long a due minute request lets a fire held in its worker go first (SHARDCRON_YIELD_BEFORE_FIRE_MS); 0: never. */
  readonly yieldBeforeFireMs: number;
  /** monitorExecution's lock: a lease kept across fires, or per run (SHARDCRON_ITEM_LEASE); unset: the namespace's. */
  readonly itemLease?: boolean;
  /** The scheduler next in line loads every job before a takeover (SHARDCRON_WARM_STANDBY, default on). */
  readonly warmStandby: boolean;
  /** How long an address has no live instance before the leader removes its ENABLED `servers/{ip}` nodes (SHARDCRON_SERVER_RETENTION_MS). */
  readonly serverRetentionMs: number;
  /** Overrides the default `{ip}@-@{pid}`. */
  readonly instanceId?: string;
  /** A Redis Cluster's seed nodes (SHARDCRON_REDIS_CLUSTER_NODES): every key of the namespace then shares the hash tag `{namespace}`. */
  readonly redisClusterNodes?: readonly ZkServer[];
  /** A Sentinel-managed primary (SHARDCRON_REDIS_SENTINELS, SHARDCRON_REDIS_SENTINEL_NAME). */
  readonly redisSentinel?: { readonly sentinels: readonly ZkServer[]; readonly name: string };
  /** The console: bind address, admin token, read-only token. */
  readonly ops: { readonly host: string; readonly port: number; readonly token?: string; readonly readToken?: string };
  /** PostgreSQL of the execution history (ElasticJob's traces); unset: no traces. */
  readonly tracingPgUrl?: string;
  /** Executions kept per job in the recent list in Redis; 0: none (SHARDCRON_HISTORY_RECENT). */
  readonly historyRecent: number;
  /** Completed requests kept per instance queue, the newest; 0: removed as they complete (SHARDCRON_COMPLETED_KEPT). */
  readonly completedKept: number;
  /** The API-defined job types this worker runs for every job of the namespace (SHARDCRON_WORKER_GENERIC). */
  readonly workerGeneric: readonly GenericJobType[];
  readonly logLevel: LogLevel;
  readonly shutdownGraceMs: number;
  /** V8's heap growing percent set at node start (0: V8's own policy; unset: by roles, see heap-growth.ts). */
  readonly heapGrowthPercent?: number;
  /** Overrides for the local ZooKeeper and Redis that `shardcron dev` and the tests start. */
  readonly localServices: { readonly java?: string; readonly zkClasspath?: string; readonly redisServer?: string; readonly pgBinDir?: string; readonly chromium?: string };
}

/** API-defined job types a generic worker can run with no code of its own. */
export const GENERIC_JOB_TYPES = Object.freeze(['script', 'http'] as const);
export type GenericJobType = (typeof GENERIC_JOB_TYPES)[number];

/** One documented environment variable. `default` is undefined for variables that are unset by default. */
export interface EnvVariable {
  readonly name: `SHARDCRON_${string}`;
  readonly default: string | undefined;
  readonly description: string;
}

/** How long a due minute request lets a fire held in its worker go first, when none is configured (ms). */
export const DEFAULT_YIELD_BEFORE_FIRE_MS = 50;

/** Bounds [min, max] of a worker's sizes, from the environment or given in code (WorkerService checks these). */
export const WORKER_BOUNDS = Object.freeze({
  concurrency: [1, 1_000] as const,
  prefetch: [0, 10_000] as const,
  consumers: [1, 64] as const,
  yieldBeforeFireMs: [0, 1_000] as const,
});

function variable<N extends `SHARDCRON_${string}`>(name: N, def: string | undefined, description: string) {
  return Object.freeze({ name, default: def, description });
}

/**
 * Every variable shardcron reads, in documentation order: the single source of the defaults applied by
 * {@link loadEnvConfig}, of {@link describeEnv} (docs/configuration.md) and of `shardcron env`.
 */
export const ENV_VARIABLES = Object.freeze([
  variable('SHARDCRON_ZK', '127.0.0.1:2181',
    'ZooKeeper ensemble: comma-separated `host:port` list; hosts are IPv4 addresses, hostnames or `[IPv6]`, ports 1-65535. No `/chroot` suffix: the namespace is the chroot.'),
  variable('SHARDCRON_ZK_SESSION_TIMEOUT_MS', '10000',
    'ZooKeeper session timeout, 1000-600000 ms (the server clamps it to 2-20 times its tickTime). A worker that loses its connection aborts its executions before this deadline.'),
  variable('SHARDCRON_ZK_CONNECT_TIMEOUT_MS', '15000',
    'How long to wait for a ZooKeeper connection, 100-600000 ms.'),
  variable('SHARDCRON_ZK_BASE_SLEEP_MS', '1000',
    'First retry delay of a failed ZooKeeper operation, 1-60000 ms; doubles on each retry (ElasticJob `baseSleepTimeMilliseconds`).'),
  variable('SHARDCRON_ZK_MAX_SLEEP_MS', '3000',
    'Longest retry delay, 1-600000 ms, at least SHARDCRON_ZK_BASE_SLEEP_MS (ElasticJob `maxSleepTimeMilliseconds`).'),
  variable('SHARDCRON_ZK_MAX_RETRIES', '3',
    'Retries of a failed ZooKeeper operation, 0-29 (Curator\'s limit; ElasticJob `maxRetries`).'),
  variable('SHARDCRON_ZK_DIGEST', undefined,
    'ZooKeeper digest authentication `user:password`, both non-empty (ElasticJob `digest`). Unset: no authentication.'),
  variable('SHARDCRON_NAMESPACE', 'shardcron',
    'Scheduling domain: ZooKeeper root `/{namespace}`, Redis key prefix, one leader. 1-128 characters from `A-Z a-z 0-9 _ . -`, starting with a letter or digit; not `zookeeper`.'),
  variable('SHARDCRON_REDIS_URL', 'redis://127.0.0.1:6379',
    'Redis of the BullMQ queues: `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS.'),
  variable('SHARDCRON_REDIS_CLUSTER_NODES', undefined,
    'Redis Cluster seed nodes, `host:port,...` (instead of SHARDCRON_REDIS_URL\'s host; its user, password and TLS still apply). Every key of a namespace then shares the hash tag `{namespace}`: one namespace lives on one shard (docs/deployment.md).'),
  variable('SHARDCRON_REDIS_SENTINELS', undefined,
    'Redis Sentinels, `host:port,...`, watching the primary SHARDCRON_REDIS_SENTINEL_NAME names (instead of SHARDCRON_REDIS_URL\'s host; its user, password and database still apply). A primary failover is followed without a restart.'),
  variable('SHARDCRON_REDIS_SENTINEL_NAME', undefined,
    'With SHARDCRON_REDIS_SENTINELS: the name the Sentinels know the primary by (e.g. mymaster).'),
  variable('SHARDCRON_ROLES', 'scheduler,worker,console',
    'Comma-separated roles of this process: `scheduler` (leader candidate), `worker` (runs items), `console` (ops HTTP server). At least one.'),
  variable('SHARDCRON_JOBS', undefined,
    'Path of a jobs module (default export: an array of `defineJob(...)`). Read by `shardcron start`, and by `startNode()` when given no `jobs`. Unset: jobs come only from code (`startNode({ jobs })`).'),
  variable('SHARDCRON_CONCURRENCY', '10',
    'Handlers one worker instance runs at once, 1-1000.'),
  variable('SHARDCRON_PREFETCH', undefined,
    'Requests one worker instance takes from its queue beyond its concurrency, 0-10000. Unset: ten per unit of concurrency, at most 1000. Such a request waits for its fire time (requests arrive up to 300 ms early, 700 ms for ten minutes after rarer jobs burst behind frequent ones, those of a fire of 2,000 requests or more up to 800 ms), its lock and a free handler, holding no handler meanwhile; with monitorExecution its item shows `running` from when its lock is taken.'),
  variable('SHARDCRON_CONSUMERS', undefined,
    'BullMQ consumers one worker instance splits the requests it takes at once (concurrency + prefetch) over, 1-64. Unset: one per 4 of concurrency, at most 64. Each fetches jobs one round trip at a time, so several start a fire\'s items sooner; each holds one Redis connection.'),
  variable('SHARDCRON_YIELD_BEFORE_FIRE_MS', String(DEFAULT_YIELD_BEFORE_FIRE_MS),
    'Milliseconds, 0-1000. A request of a job firing once a minute or less often (prioritized while the namespace has faster jobs) that a worker takes when it is due already, while that worker holds requests for a fire due within this long, waits for that fire and starts right after its requests: at a whole minute the frequent jobs then start closer to their time. 0: such requests start at once.'),
  variable('SHARDCRON_ITEM_LEASE', undefined,
    'monitorExecution\'s lock. Unset: the lock the namespace records (`/.cluster/item-lock`); a namespace without one records it at its first worker\'s start: a lease, or the per-run lock while a worker of an earlier version runs in it. `on`: the lease (a worker keeps an item\'s `running` node across fires and records each run in Redis, no ZooKeeper request per run); `off`: the node created and deleted, and the run recorded in ZooKeeper, per run (docs/design-notes.md, "Item leases"). A value that differs from the namespace\'s stops the worker with an error: every worker of a namespace uses one lock. `shardcron item-lock` shows and switches it.'),
  variable('SHARDCRON_WARM_STANDBY', 'on',
    'Scheduler role, `on`: the candidate next in line for leadership loads and follows every job while it waits, so that its takeover reads only what changed since (it dispatches 0.35 s after the election at 10,000 jobs and 0.7-1.5 s at 100,000 across runs, against 8.8 s and 67 s loading at the election); it then holds about the leader\'s memory and ZooKeeper watches. Candidates further back load nothing. `off`: a new leader loads every job when elected (docs/design-notes.md, "Warm standby").'),
  variable('SHARDCRON_SERVER_RETENTION_MS', '600000',
    'Scheduler role: how long no live instance has an address, 1000-604800000 ms, before the leader removes the `/{job}/servers/{ip}` nodes of that address that say ENABLED (a rolling deploy onto new addresses leaves one per job and old address). A DISABLED one stays, an operator\'s switch; a worker that comes back on that address makes its nodes again (docs/design-notes.md, "Servers of gone addresses").'),
  variable('SHARDCRON_INSTANCE_ID', undefined,
    'Overrides the instance id `{ip}@-@{pid}`: 1-128 printable ASCII characters, no spaces, no `/`. Must be unique among the live processes of the namespace.'),
  variable('SHARDCRON_OPS_HOST', '127.0.0.1',
    'Address the console binds: IPv4, IPv6 or hostname. A non-loopback address requires SHARDCRON_OPS_TOKEN.'),
  variable('SHARDCRON_OPS_PORT', '8080',
    'Port of the console, 0-65535 (0: any free port).'),
  variable('SHARDCRON_OPS_TOKEN', undefined,
    'Bearer token of the console: printable ASCII without spaces (e.g. `openssl rand -hex 32`). Required when the console binds a non-loopback address, and then at least 16 characters; on loopback a shorter one is accepted with a warning at start.'),
  variable('SHARDCRON_OPS_READ_TOKEN', undefined,
    'A read-only console token (Bearer): reads the API, the dashboard and Bull Board, changes nothing. Other than SHARDCRON_OPS_TOKEN; its length rule is the same.'),
  variable('SHARDCRON_TRACING_PG_URL', undefined,
    'PostgreSQL of the execution history, `postgres://user:password@host:port/db`: ElasticJob\'s job_execution_log and job_status_trace_log, created on start (docs/history.md). Unset: the recent executions in Redis only.'),
  variable('SHARDCRON_HISTORY_RECENT', '1000',
    'Executions each job keeps in its recent list in Redis (what the console and `GET /api/jobs/:name/executions` show first), 0-1000000; 0: none kept.'),
  variable('SHARDCRON_COMPLETED_KEPT', '0',
    'Completed execution requests the leader has Redis keep per instance queue, the newest, for Bull Board\'s Completed tab, 0-100000; 0: each is removed as it completes (docs/design-notes.md, "Redis memory": keeping them costs Redis calls on every completion).'),
  variable('SHARDCRON_WORKER_GENERIC', undefined,
    'API-defined job types this worker runs for every such job of the namespace, with no code of its own: `script`, `http` or `script,http`.'),
  variable('SHARDCRON_LOG_LEVEL', 'info',
    'Log level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`.'),
  variable('SHARDCRON_SHUTDOWN_GRACE_MS', '30000',
    'On SIGTERM, how long running executions may take to finish before they are aborted, 0-3600000 ms.'),
  variable('SHARDCRON_HEAP_GROWTH_PERCENT', undefined,
    'How far V8 may grow the heap past its live size before a full GC, 0-400 percent; 0 keeps V8\'s own policy (up to 300%). Unset: 50 on a node with the scheduler role (bounds a leader\'s RSS at thousands of jobs), 30 on the others (a worker\'s at thousands of items a second: in 20 paired throughput rounds its RSS had a median of 145 MB at 30 against 154.5 MB at 50, and 207-239 MB with V8\'s policy in an earlier run, with the same CPU per item). A node started with `--heap-growing-percent` keeps that flag. While a leader or standby loads its jobs, the bound is 20 when it is larger: at 100,000 jobs that load set the peak RSS, 615-618 MB at 50 throughout against 514-563 MB with the load at 20 (bench/RESULTS.md, "Leader memory at the election").'),
  variable('SHARDCRON_JAVA', undefined,
    'Local services only (`shardcron dev`, tests): the java executable that runs ZooKeeper. Unset: `$JAVA_HOME/bin/java`, else `java` on PATH.'),
  variable('SHARDCRON_ZK_CLASSPATH', undefined,
    'Local services only: a classpath holding ZooKeeper\'s jars (e.g. `/opt/zookeeper/lib/*`). Unset: Debian\'s `zookeeper` package.'),
  variable('SHARDCRON_REDIS_SERVER', undefined,
    'Local services only: the redis-server executable. Unset: `redis-server` on PATH.'),
  variable('SHARDCRON_PG_BIN_DIR', undefined,
    'Local services only (tests): the directory of PostgreSQL\'s `initdb` and `postgres`. Unset: the newest `/usr/lib/postgresql/*/bin`, else PATH.'),
  variable('SHARDCRON_CHROMIUM', undefined,
    'Tests only: the Chromium the browser tests drive. Unset: `/usr/bin/chromium`.'),
  variable('SHARDCRON_SHARDING_CONTEXT', undefined,
    'Not set by users: shardcron sets it to the ShardingContext JSON in a SCRIPT job\'s process. A node or CLI started by such a script accepts it and ignores it.'),
] satisfies EnvVariable[]);

/** Name of a known variable. */
export type EnvVariableName = (typeof ENV_VARIABLES)[number]['name'];

const KNOWN_NAMES: ReadonlySet<string> = new Set(ENV_VARIABLES.map((v) => v.name));
const PREFIX = 'SHARDCRON_';

// ---------------------------------------------------------------------------------------------------
// The schema. Field issues carry the variable name as their path, so ConfigError names it.

function fromString<T>(parse: (raw: string) => Parsed<T>) {
  return z.string().transform((raw, ctx): T => {
    const result = parse(raw);
    if (result.ok) return result.value;
    ctx.addIssue({ code: 'custom', message: result.message });
    return z.NEVER;
  });
}

function withDefault<T>(name: EnvVariableName, parse: (raw: string) => Parsed<T>) {
  const fallback = ENV_VARIABLES.find((v) => v.name === name)?.default;
  if (fallback === undefined) throw new Error(`${name} has no default in ENV_VARIABLES`);
  // The default goes through the same parser as a user's value, so a bad default cannot hide.
  return z.preprocess((value) => value ?? fallback, fromString(parse));
}

const optional = <T>(parse: (raw: string) => Parsed<T>) => fromString(parse).optional();

const shape = {
  SHARDCRON_ZK: withDefault('SHARDCRON_ZK', parseZk),
  SHARDCRON_ZK_SESSION_TIMEOUT_MS: withDefault('SHARDCRON_ZK_SESSION_TIMEOUT_MS', integer(1000, 600_000, ' (milliseconds)')),
  SHARDCRON_ZK_CONNECT_TIMEOUT_MS: withDefault('SHARDCRON_ZK_CONNECT_TIMEOUT_MS', integer(100, 600_000, ' (milliseconds)')),
  SHARDCRON_ZK_BASE_SLEEP_MS: withDefault('SHARDCRON_ZK_BASE_SLEEP_MS', integer(1, 60_000, ' (milliseconds)')),
  SHARDCRON_ZK_MAX_SLEEP_MS: withDefault('SHARDCRON_ZK_MAX_SLEEP_MS', integer(1, 600_000, ' (milliseconds)')),
  // Curator's ExponentialBackoffRetry caps retries at 29 (the delay doubles and would overflow an int).
  SHARDCRON_ZK_MAX_RETRIES: withDefault('SHARDCRON_ZK_MAX_RETRIES', integer(0, 29)),
  SHARDCRON_ZK_DIGEST: optional(parseDigest),
  SHARDCRON_NAMESPACE: withDefault('SHARDCRON_NAMESPACE', parseNamespace),
  SHARDCRON_REDIS_URL: withDefault('SHARDCRON_REDIS_URL', parseRedisUrl),
  SHARDCRON_REDIS_CLUSTER_NODES: optional(parseHostPortList('redis1:7000,redis2:7000,redis3:7000')),
  SHARDCRON_REDIS_SENTINELS: optional(parseHostPortList('sentinel1:26379,sentinel2:26379,sentinel3:26379')),
  SHARDCRON_REDIS_SENTINEL_NAME: optional(parseSentinelName),
  SHARDCRON_ROLES: withDefault('SHARDCRON_ROLES', subsetOf(ROLES, 'role')),
  SHARDCRON_JOBS: optional(parseJobsModule),
  SHARDCRON_CONCURRENCY: withDefault('SHARDCRON_CONCURRENCY', integer(...WORKER_BOUNDS.concurrency)),
  SHARDCRON_PREFETCH: optional(integer(...WORKER_BOUNDS.prefetch)),
  SHARDCRON_CONSUMERS: optional(integer(...WORKER_BOUNDS.consumers)),
  SHARDCRON_YIELD_BEFORE_FIRE_MS: withDefault('SHARDCRON_YIELD_BEFORE_FIRE_MS', integer(...WORKER_BOUNDS.yieldBeforeFireMs, ' (milliseconds)')),
  SHARDCRON_ITEM_LEASE: optional(oneOf(['on', 'off'] as const, 'value')),
  SHARDCRON_WARM_STANDBY: withDefault('SHARDCRON_WARM_STANDBY', oneOf(['on', 'off'] as const, 'value')),
  SHARDCRON_SERVER_RETENTION_MS: withDefault('SHARDCRON_SERVER_RETENTION_MS', integer(1000, 604_800_000, ' (milliseconds)')),
  SHARDCRON_INSTANCE_ID: optional(parseInstanceId),
  SHARDCRON_OPS_HOST: withDefault('SHARDCRON_OPS_HOST', parseOpsHost),
  SHARDCRON_OPS_PORT: withDefault('SHARDCRON_OPS_PORT', integer(0, 65535)),
  SHARDCRON_OPS_TOKEN: optional(parseOpsToken),
  SHARDCRON_OPS_READ_TOKEN: optional(parseOpsToken),
  SHARDCRON_TRACING_PG_URL: optional(parsePostgresUrl),
  SHARDCRON_HISTORY_RECENT: withDefault('SHARDCRON_HISTORY_RECENT', integer(0, 1_000_000, ' (executions per job)')),
  SHARDCRON_COMPLETED_KEPT: withDefault('SHARDCRON_COMPLETED_KEPT', integer(0, 100_000, ' (requests per queue)')),
  SHARDCRON_WORKER_GENERIC: optional(subsetOf(GENERIC_JOB_TYPES, 'job type')),
  SHARDCRON_LOG_LEVEL: withDefault('SHARDCRON_LOG_LEVEL', oneOf(LOG_LEVELS, 'log level')),
  SHARDCRON_SHUTDOWN_GRACE_MS: withDefault('SHARDCRON_SHUTDOWN_GRACE_MS', integer(0, 3_600_000, ' (milliseconds)')),
  // Read by src/dev (local services), not by the node; listed so they are documented and not "unknown".
  SHARDCRON_HEAP_GROWTH_PERCENT: optional(integer(0, 400, ' (percent)')),
  SHARDCRON_JAVA: optional(parseFilePath),
  SHARDCRON_ZK_CLASSPATH: optional(parseFilePath),
  SHARDCRON_REDIS_SERVER: optional(parseFilePath),
  SHARDCRON_PG_BIN_DIR: optional(parseFilePath),
  SHARDCRON_CHROMIUM: optional(parseFilePath),
  // Any value: what a SCRIPT job's process inherits, never read as configuration.
  SHARDCRON_SHARDING_CONTEXT: z.string().optional(),
} satisfies Record<EnvVariableName, z.ZodType>;

/** Keeps the SHARDCRON_* entries (any case, to catch `shardcron_zk`) and drops empty ones: `VAR=` means unset. */
function selectVariables(env: unknown): unknown {
  if (typeof env !== 'object' || env === null) return env;
  const selected: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.toUpperCase().startsWith(PREFIX) && value !== undefined && value !== '') selected[key] = value;
  }
  return selected;
}

/** A cross-field rule runs only when the fields it reads are valid, so it never reports a follow-on error. */
function whenValid(...names: EnvVariableName[]) {
  return { when: (payload: z.core.ParsePayload) => !payload.issues.some((i) => names.includes(i.path?.[0] as EnvVariableName)) };
}

/**
 * The zod schema of the environment: input is an env record (like `process.env`), output is
 * {@link ShardcronEnvConfig} (not yet frozen; {@link loadEnvConfig} freezes it).
 */
export const envSchema = z.preprocess(
  selectVariables,
  z
    .looseObject(shape)
    // Unknown variables run regardless of other failures: a typo is often the cause of those.
    .superRefine((env, ctx) => {
      for (const name of Object.keys(env).filter((k) => !KNOWN_NAMES.has(k)).sort()) {
        const known = [...KNOWN_NAMES].find((k) => k === name.toUpperCase());
        const hint = known ? ` (names are case-sensitive: did you mean ${known}?)` : didYouMean(name, [...KNOWN_NAMES]);
        ctx.addIssue({ code: 'custom', path: [name], message: `unknown variable${hint}; see docs/configuration.md for the list` });
      }
    }, { when: () => true })
    .superRefine((env, ctx) => {
      if (env.SHARDCRON_ZK_MAX_SLEEP_MS < env.SHARDCRON_ZK_BASE_SLEEP_MS) {
        ctx.addIssue({
          code: 'custom',
          path: ['SHARDCRON_ZK_MAX_SLEEP_MS'],
          message: `${env.SHARDCRON_ZK_MAX_SLEEP_MS} is below SHARDCRON_ZK_BASE_SLEEP_MS (${env.SHARDCRON_ZK_BASE_SLEEP_MS}); the longest retry delay must be at least the first one`,
        });
      }
    }, whenValid('SHARDCRON_ZK_BASE_SLEEP_MS', 'SHARDCRON_ZK_MAX_SLEEP_MS'))
    .superRefine((env, ctx) => {
      // DESIGN.md: the console refuses a non-loopback bind without a token. Failing here, at start,
      // beats a process that comes up and then has no console.
      const host = env.SHARDCRON_OPS_HOST;
      if (env.SHARDCRON_ROLES.includes('console') && !isLoopbackHost(host) && env.SHARDCRON_OPS_TOKEN === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['SHARDCRON_OPS_TOKEN'],
          message: `is required: the console role binds the non-loopback address ${quote(host)} (SHARDCRON_OPS_HOST); set a token (openssl rand -hex 32), or bind 127.0.0.1`,
        });
      }
      if (env.SHARDCRON_ROLES.includes('console')) {
        for (const { field, message } of shortTokenIssues(host, { admin: env.SHARDCRON_OPS_TOKEN, read: env.SHARDCRON_OPS_READ_TOKEN })) ctx.addIssue({ code: 'custom', path: [field], message });
      }
    }, whenValid('SHARDCRON_ROLES', 'SHARDCRON_OPS_HOST', 'SHARDCRON_OPS_TOKEN', 'SHARDCRON_OPS_READ_TOKEN'))
    .superRefine((env, ctx) => {
      if (env.SHARDCRON_OPS_READ_TOKEN !== undefined && env.SHARDCRON_OPS_READ_TOKEN === env.SHARDCRON_OPS_TOKEN) {
        ctx.addIssue({ code: 'custom', path: ['SHARDCRON_OPS_READ_TOKEN'], message: 'is the same as SHARDCRON_OPS_TOKEN; a read-only token must differ from the admin token' });
      }
    }, whenValid('SHARDCRON_OPS_TOKEN', 'SHARDCRON_OPS_READ_TOKEN'))
    .superRefine((env, ctx) => {
      const sentinels = env.SHARDCRON_REDIS_SENTINELS !== undefined;
      const name = env.SHARDCRON_REDIS_SENTINEL_NAME !== undefined;
      if (sentinels && !name) ctx.addIssue({ code: 'custom', path: ['SHARDCRON_REDIS_SENTINEL_NAME'], message: 'is required with SHARDCRON_REDIS_SENTINELS: the name the Sentinels know the primary by' });
      if (name && !sentinels) ctx.addIssue({ code: 'custom', path: ['SHARDCRON_REDIS_SENTINELS'], message: 'is required with SHARDCRON_REDIS_SENTINEL_NAME: the Sentinels to ask for that primary' });
      if (sentinels && env.SHARDCRON_REDIS_CLUSTER_NODES !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['SHARDCRON_REDIS_CLUSTER_NODES'], message: 'and SHARDCRON_REDIS_SENTINELS exclude each other: a Redis Cluster fails over on its own' });
      }
    }, whenValid('SHARDCRON_REDIS_SENTINELS', 'SHARDCRON_REDIS_SENTINEL_NAME', 'SHARDCRON_REDIS_CLUSTER_NODES')),
).transform((env): ShardcronEnvConfig => {
  const digest = env.SHARDCRON_ZK_DIGEST;
  const token = env.SHARDCRON_OPS_TOKEN;
  const readToken = env.SHARDCRON_OPS_READ_TOKEN;
  return {
    zk: {
      connectionString: env.SHARDCRON_ZK.connectionString,
      servers: env.SHARDCRON_ZK.servers,
      sessionTimeoutMs: env.SHARDCRON_ZK_SESSION_TIMEOUT_MS,
      connectTimeoutMs: env.SHARDCRON_ZK_CONNECT_TIMEOUT_MS,
      baseSleepMs: env.SHARDCRON_ZK_BASE_SLEEP_MS,
      maxSleepMs: env.SHARDCRON_ZK_MAX_SLEEP_MS,
      maxRetries: env.SHARDCRON_ZK_MAX_RETRIES,
      ...(digest !== undefined && { digest }),
    },
    namespace: env.SHARDCRON_NAMESPACE,
    redisUrl: env.SHARDCRON_REDIS_URL,
    roles: env.SHARDCRON_ROLES,
    ...(env.SHARDCRON_JOBS !== undefined && { jobsModule: env.SHARDCRON_JOBS }),
    concurrency: env.SHARDCRON_CONCURRENCY,
    ...(env.SHARDCRON_PREFETCH !== undefined && { prefetch: env.SHARDCRON_PREFETCH }),
    ...(env.SHARDCRON_CONSUMERS !== undefined && { consumers: env.SHARDCRON_CONSUMERS }),
    yieldBeforeFireMs: env.SHARDCRON_YIELD_BEFORE_FIRE_MS,
    ...(env.SHARDCRON_ITEM_LEASE !== undefined && { itemLease: env.SHARDCRON_ITEM_LEASE === 'on' }),
    warmStandby: env.SHARDCRON_WARM_STANDBY === 'on',
    serverRetentionMs: env.SHARDCRON_SERVER_RETENTION_MS,
    ...(env.SHARDCRON_INSTANCE_ID !== undefined && { instanceId: env.SHARDCRON_INSTANCE_ID }),
    ...(env.SHARDCRON_REDIS_CLUSTER_NODES !== undefined && { redisClusterNodes: env.SHARDCRON_REDIS_CLUSTER_NODES }),
    ...(env.SHARDCRON_REDIS_SENTINELS !== undefined &&
      env.SHARDCRON_REDIS_SENTINEL_NAME !== undefined && { redisSentinel: { sentinels: env.SHARDCRON_REDIS_SENTINELS, name: env.SHARDCRON_REDIS_SENTINEL_NAME } }),
    ops: { host: env.SHARDCRON_OPS_HOST, port: env.SHARDCRON_OPS_PORT, ...(token !== undefined && { token }), ...(readToken !== undefined && { readToken }) },
    ...(env.SHARDCRON_TRACING_PG_URL !== undefined && { tracingPgUrl: env.SHARDCRON_TRACING_PG_URL }),
    historyRecent: env.SHARDCRON_HISTORY_RECENT,
    completedKept: env.SHARDCRON_COMPLETED_KEPT,
    workerGeneric: env.SHARDCRON_WORKER_GENERIC ?? [],
    logLevel: env.SHARDCRON_LOG_LEVEL,
    shutdownGraceMs: env.SHARDCRON_SHUTDOWN_GRACE_MS,
    ...(env.SHARDCRON_HEAP_GROWTH_PERCENT !== undefined && { heapGrowthPercent: env.SHARDCRON_HEAP_GROWTH_PERCENT }),
    localServices: {
      ...(env.SHARDCRON_JAVA !== undefined && { java: env.SHARDCRON_JAVA }),
      ...(env.SHARDCRON_ZK_CLASSPATH !== undefined && { zkClasspath: env.SHARDCRON_ZK_CLASSPATH }),
      ...(env.SHARDCRON_REDIS_SERVER !== undefined && { redisServer: env.SHARDCRON_REDIS_SERVER }),
      ...(env.SHARDCRON_PG_BIN_DIR !== undefined && { pgBinDir: env.SHARDCRON_PG_BIN_DIR }),
      ...(env.SHARDCRON_CHROMIUM !== undefined && { chromium: env.SHARDCRON_CHROMIUM }),
    },
  };
});

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

function variableOrder(field: string): number {
  const index = ENV_VARIABLES.findIndex((v) => v.name === field);
  return index < 0 ? ENV_VARIABLES.length : index;
}

/**
 * Reads and validates every SHARDCRON_* variable of `env`. Returns the deeply frozen config, or throws
 * one {@link ConfigError} (code SHARDCRON_INVALID_CONFIG) whose `issues` name every invalid or unknown
 * variable (`field` = variable name). Empty values count as unset.
 */
export function loadEnvConfig(env: Record<string, string | undefined> = process.env): ShardcronEnvConfig {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    // Documentation order reads better than zod's (cross-field rules last); sort is stable.
    const issues: FieldIssue[] = toFieldIssues(result.error).sort((a, b) => variableOrder(a.field) - variableOrder(b.field));
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid shardcron environment (see docs/configuration.md)', issues);
  }
  return deepFreeze(result.data);
}

/** The markdown table of {@link ENV_VARIABLES} (Variable | Default | Description), as in docs/configuration.md. */
export function describeEnv(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const rows = ENV_VARIABLES.map(
    (v) => `| \`${v.name}\` | ${v.default === undefined ? '(unset)' : `\`${cell(v.default)}\``} | ${cell(v.description)} |`,
  );
  return ['| Variable | Default | Description |', '| --- | --- | --- |', ...rows].join('\n');
}
