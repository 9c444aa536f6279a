/**
 * ZooKeeper and Redis for `shardcron dev`: the ones at SHARDCRON_ZK / SHARDCRON_REDIS_URL when they
 * answer, else local throwaway servers (src/dev), installed first with apt-get when missing and allowed.
 */
import net from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { LOOPBACK } from '../dev/free-port';
import { RedisServer } from '../dev/redis-server';
import { ZooKeeperServer } from '../dev/zookeeper-server';
import type { ShardcronEnvConfig } from '../shared/config/env-config';
import { isLoopbackHost } from '../shared/config/env-config';
import type { Logger } from '../shared/logger';
import { clockTime } from './dev-log';
import { findMissingServers, installFacts, planInstall, runInstall } from './dev-install';
import { probeRedis, redactRedisUrl, zooKeeperAnswers } from './service-probe';

/** Tick of a local ZooKeeper: sessions from 1 s (2 ticks), so the workers' 4 s sessions are granted. */
export const DEV_ZK_TICK_MS = 500;
/** How long an existing server gets to answer before dev starts its own. */
const PROBE_TIMEOUT_MS = 2_000;

/** One server dev uses: where it is, and whether dev started it (then it has a pid and is stopped on exit). */
export interface DevServer {
  /** For display (a Redis password is masked). */
  readonly address: string;
  /** For connecting: SHARDCRON_ZK or SHARDCRON_REDIS_URL of the node processes. */
  readonly connect: string;
  readonly startedHere: boolean;
  readonly pid?: number;
  readonly port?: number;
}

/** The servers in use and how to get rid of the ones started here. */
export interface DevServices {
  readonly zookeeper: DevServer;
  readonly redis: DevServer;
  /** True when ZooKeeper was started here (its namespaces are all ours). */
  readonly local: boolean;
  /** The SHARDCRON_* variables that point the nodes at these servers. */
  readonly nodeEnv: Readonly<Record<string, string>>;
  /** Where each server runs, as printed before the log (one or more lines each). */
  describe(): string[];
  /** A data dir started here and removed on stop, to show. */
  readonly dataDir?: string;
  /** Stops the servers started here (SIGTERM, then SIGKILL) and removes their data; idempotent. */
  close(): Promise<void>;
  /** Kills them at once (SIGKILL) and removes their data. */
  kill(): Promise<void>;
}

/** Thrown when dev cannot go on; the message has been printed already. */
export class DevAbort extends Error {
  constructor(readonly exitCode: 1 | 2, message: string) {
    super(message);
    this.name = 'DevAbort';
  }
}

/** True when `port` can be bound on 127.0.0.1 right now. */
function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: LOOPBACK, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * The port a local server takes: the one the user's address names when it is on this machine and
 * free (so `SHARDCRON_ZK=127.0.0.1:2181` means a ZooKeeper on 2181), else 0 = any free port.
 */
async function preferredPort(host: string | undefined, port: number | undefined): Promise<number> {
  if (host === undefined || port === undefined || !isLoopbackHost(host)) return 0;
  return (await canBind(port)) ? port : 0;
}

/** One line about a server: where it is, and whether it was started here. */
export function describeServer(name: string, server: DevServer, extra: string): string {
  const how = server.startedHere ? `started here, pid ${server.pid}${extra}` : 'already running; used as is';
  return `  ${name.padEnd(10)} ${server.address}  (${how})`;
}

/** Lines the local servers log at warn and above (e.g. "zookeeper exited with code 1") go to `print`. */
export function serverLogger(print: (line: string) => void): Logger {
  return pino({ level: 'warn' }, {
    write(line: string) {
      let text = line.trim();
      try {
        text = (JSON.parse(line) as { msg?: string }).msg ?? text;
      } catch {
        // not JSON: print it as it is
      }
      print(`${clockTime(Date.now())}  WARN ${text}`);
    },
  });
}

/** Options of {@link ensureDevServices}. */
export interface EnsureDevServicesOptions {
  config: ShardcronEnvConfig;
  env: NodeJS.ProcessEnv;
  noInstall: boolean;
  /** Parent of the local ZooKeeper's data dir (removed by the caller). */
  tempDir: string;
  print(line: string): void;
}

/** Finds or starts ZooKeeper and Redis. Throws {@link DevAbort} when a server is missing and cannot be installed. */
export async function ensureDevServices(options: EnsureDevServicesOptions): Promise<DevServices> {
  const { config, env, print } = options;
  const [zkAnswers, redisProbe] = await Promise.all([
    zooKeeperAnswers(config.zk.servers, config.zk.connectionString, config.namespace, PROBE_TIMEOUT_MS),
    probeRedis(config.redisUrl, PROBE_TIMEOUT_MS),
  ]);
  const needed = { zookeeper: !zkAnswers, redis: !redisProbe.ok };
  await ensureInstalled(needed, options);

  const logger = serverLogger(print);
  const firstZk = config.zk.servers.length === 1 ? config.zk.servers[0] : undefined;
  const redisUrl = new URL(config.redisUrl);
  const [zk, redis] = await Promise.allSettled([
    needed.zookeeper
      ? preferredPort(firstZk?.host, firstZk?.port).then((port) =>
          ZooKeeperServer.start({ tickTimeMs: DEV_ZK_TICK_MS, port, dataDir: path.join(options.tempDir, 'zookeeper'), logger, env }))
      : undefined,
    needed.redis ? preferredPort(redisUrl.hostname, Number(redisUrl.port || 6379)).then((port) => RedisServer.start({ port, logger, env })) : undefined,
  ]);
  const started = [zk, redis].flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
  const failed = [zk, redis].find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.allSettled(started.map((s) => s.close()));
    print(`Could not start a local server: ${(failed.reason as Error).message}`);
    throw new DevAbort(1, 'local server failed to start');
  }
  const zkServer = zk.status === 'fulfilled' ? zk.value : undefined;
  const redisServer = redis.status === 'fulfilled' ? redis.value : undefined;
  let closing: Promise<void> | undefined;
  const zookeeper: DevServer = zkServer
    ? { address: zkServer.connectionString, connect: zkServer.connectionString, startedHere: true, pid: zkServer.pid, port: zkServer.port }
    : { address: config.zk.connectionString, connect: config.zk.connectionString, startedHere: false };
  const redisInUse: DevServer = redisServer
    ? { address: redisServer.url, connect: redisServer.url, startedHere: true, pid: redisServer.pid, port: redisServer.port }
    : { address: redactRedisUrl(config.redisUrl), connect: config.redisUrl, startedHere: false };
  return {
    zookeeper,
    redis: redisInUse,
    local: zkServer !== undefined,
    nodeEnv: { SHARDCRON_ZK: zookeeper.connect, SHARDCRON_REDIS_URL: redisInUse.connect },
    describe: () => [describeServer('zookeeper', zookeeper, `, tick ${DEV_ZK_TICK_MS} ms`), describeServer('redis', redisInUse, '')],
    ...(zkServer && { dataDir: options.tempDir }),
    close: () => (closing ??= Promise.allSettled(started.map((s) => s.close())).then(() => undefined)),
    kill: async () => {
      await Promise.allSettled(started.map((s) => s.kill()));
      await Promise.allSettled(started.map((s) => s.close()));
    },
  };
}

/** Installs what `needed` lacks, or prints why not and throws {@link DevAbort}. */
export async function ensureInstalled(needed: { zookeeper: boolean; redis: boolean }, options: EnsureDevServicesOptions): Promise<void> {
  const { env, print } = options;
  const missing = findMissingServers(needed, env);
  if (missing.length === 0) return;
  const plan = planInstall(installFacts(missing, options.noInstall, env));
  const names = missing.map((m) => m.debianPackage).join(' and ');
  if (plan.action === 'refuse') {
    print(`${names} ${missing.length > 1 ? 'are' : 'is'} needed (nothing answers at the configured address) but not installed, and shardcron dev will not install ${missing.length > 1 ? 'them' : 'it'}: ${plan.why}.`);
    for (const m of missing) print(m.error.message);
    throw new DevAbort(1, 'missing dependency');
  }
  print(`${names} not installed: installing ${plan.packages.join(' ')} with apt-get (pass --no-install to refuse)`);
  if (!(await runInstall(plan, print))) {
    print(`Installing ${plan.packages.join(' ')} failed; install ${missing.length > 1 ? 'them' : 'it'} by hand:`);
    for (const m of missing) print(m.error.message);
    throw new DevAbort(1, 'install failed');
  }
  const still = findMissingServers(needed, env);
  for (const m of still) print(m.error.message);
  if (still.length > 0) throw new DevAbort(1, 'still missing after install');
}
