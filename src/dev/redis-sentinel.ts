/**
 * A Sentinel-managed Redis on this machine, for tests and `shardcron dev --ha`: a primary, a replica
 * and three Sentinels (`redis-server --sentinel`) on free loopback ports, each one a
 * {@link RedisServer} that can be stopped, killed and restarted; everything removed on close.
 */
import { silentLogger, type Logger } from '../shared/logger';
import type { RedisNode } from '../shared/redis/redis-target';
import { pollUntil } from './child-service';
import { getFreePorts, LOOPBACK } from './free-port';
import { redisCommand, redisInfo } from './redis-command';
import { findRedisServer, RedisServer } from './redis-server';

/** Options of {@link RedisSentinelGroup.start}. */
export interface RedisSentinelGroupOptions {
  /** The name the Sentinels know the primary by; default `mymaster`. */
  name?: string;
  /** How long a primary may not answer before a Sentinel thinks it down (`down-after-milliseconds`); default 1000. */
  downAfterMs?: number;
  /** Sentinel's `failover-timeout`; default 5000. */
  failoverTimeoutMs?: number;
  logger?: Logger;
  /** How long the whole start may take; default 30000. */
  startTimeoutMs?: number;
  /** Environment read by {@link findRedisServer}; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** A primary, a replica and three Sentinels watching them. */
export class RedisSentinelGroup {
  private closing: Promise<void> | undefined;

  private constructor(
    /** The name the Sentinels know the primary by. */
    readonly name: string,
    /** The data servers: the first primary, then its replica. Which one is primary now: {@link primary}. */
    readonly servers: readonly RedisServer[],
    readonly sentinels: readonly RedisServer[],
  ) {}

  /** Starts the five servers and resolves once the replica is in sync and the Sentinels can reach a quorum and authorise a failover. */
  static async start(options: RedisSentinelGroupOptions = {}): Promise<RedisSentinelGroup> {
    const env = options.env ?? process.env;
    findRedisServer(env);
    const name = options.name ?? 'mymaster';
    const logger = options.logger ?? silentLogger;
    const [primaryPort, replicaPort, ...sentinelPorts] = await getFreePorts(5);
    const started: RedisServer[] = [];
    const track = async (server: Promise<RedisServer>) => {
      const s = await server;
      started.push(s);
      return s;
    };
    try {
      const primary = await track(RedisServer.start({ port: primaryPort, logger, env, name: 'redis primary' }));
      const replica = await track(RedisServer.start({ port: replicaPort, logger, env, name: 'redis replica', args: ['--replicaof', LOOPBACK, String(primaryPort)] }));
      const sentinels = await Promise.all(sentinelPorts.map((port, i) => track(RedisServer.start({
        port, logger, env, name: `redis sentinel ${i + 1}`, sentinel: true,
        config: [
          `sentinel monitor ${name} ${LOOPBACK} ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 5_000}`,
          `sentinel parallel-syncs ${name} 1`,
        ],
      }))));
      const group = new RedisSentinelGroup(name, [primary, replica], sentinels);
      await group.waitUntilHealthy(options.startTimeoutMs ?? 30_000);
      return group;
    } catch (err) {
      await Promise.allSettled(started.map((s) => s.close()));
      throw err;
    }
  }

  /** The Sentinels' addresses, for `SHARDCRON_REDIS_SENTINELS` (as `host:port,...` from {@link sentinelList}). */
  get sentinelAddresses(): RedisNode[] {
    return this.sentinels.map((s) => s.address);
  }

  /** `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`. */
  get sentinelList(): string {
    return this.sentinelAddresses.map((a) => `${a.host}:${a.port}`).join(',');
  }

  /** The server the Sentinels name as primary now (asked of the first one that answers). */
  async primary(): Promise<RedisServer | undefined> {
    for (const sentinel of this.sentinels.filter((s) => s.running)) {
      const reply = await redisCommand(sentinel.port, ['SENTINEL', 'get-master-addr-by-name', this.name]).catch(() => undefined);
      if (Array.isArray(reply)) return this.servers.find((s) => s.port === Number(reply[1]));
    }
    return undefined;
  }

  /**
   * Resolves once every Sentinel names a primary other than `previous` and that server says it is
   * one (`role:master`): the promotion is done. Rejects with TIMEOUT otherwise.
   */
  async waitForPromotion(previous: RedisServer, timeoutMs = 30_000): Promise<RedisServer> {
    return pollUntil(async () => {
      const named = await Promise.all(this.sentinels.filter((s) => s.running).map((s) => redisCommand(s.port, ['SENTINEL', 'get-master-addr-by-name', this.name]).catch(() => undefined)));
      const ports = new Set(named.map((reply) => (Array.isArray(reply) ? Number(reply[1]) : undefined)));
      const [port] = ports;
      if (ports.size !== 1 || port === undefined || port === previous.port) return undefined;
      const server = this.servers.find((s) => s.port === port);
      const role = server && (await redisInfo(server.port, 'replication').catch(() => undefined))?.get('role');
      return role === 'master' ? server : undefined;
    }, { timeoutMs, intervalMs: 100, describe: () => `the Sentinels to promote a new primary in place of port ${previous.port}` });
  }

  /**
   * Resolves once the primary has a replica in sync (`master_link_status:up`) and every running
   * Sentinel can authorise a failover (`SENTINEL CKQUORUM`): what a failover needs.
   */
  async waitUntilHealthy(timeoutMs = 30_000): Promise<void> {
    await pollUntil(async () => {
      const primary = await this.primary();
      if (!primary?.running) return false;
      const replicas = this.servers.filter((s) => s !== primary && s.running);
      for (const replica of replicas) {
        if ((await redisInfo(replica.port, 'replication').catch(() => undefined))?.get('master_link_status') !== 'up') return false;
      }
      for (const sentinel of this.sentinels.filter((s) => s.running)) {
        const known = await redisCommand(sentinel.port, ['SENTINEL', 'replicas', this.name]).catch(() => []);
        if (!Array.isArray(known) || known.length < replicas.length) return false;
        const quorum = await redisCommand(sentinel.port, ['SENTINEL', 'ckquorum', this.name]).catch(() => '');
        if (!String(quorum).startsWith('OK')) return false;
      }
      return true;
    }, { timeoutMs, intervalMs: 200, describe: () => 'the Sentinel group to be healthy: a replica in sync, the Sentinels agreeing on the primary and able to fail over' });
  }

  /** Stops every server and removes the temp dirs; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async doClose(): Promise<void> {
    // Sentinels first: they would otherwise react to the data servers going away.
    const results = [
      ...(await Promise.allSettled(this.sentinels.map((s) => s.close()))),
      ...(await Promise.allSettled(this.servers.map((s) => s.close()))),
    ];
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
