/**
 * The one Redis connection factory of every role (worker, leader, and whatever else reaches Redis):
 * a target ({@link RedisTarget}) in, an ioredis client out, set up as BullMQ needs it.
 */
import { Cluster, Redis, SentinelConnector, type ClusterOptions, type RedisOptions, type SentinelConnectionOptions } from 'ioredis';
import { silentLogger, type Logger } from '../logger';
import { describeRedisTarget, redisTopology, redisUrlParts, type RedisTarget } from './redis-target';

/** A client of any topology: a `Redis` (standalone, Sentinel) or a `Cluster`. BullMQ takes both. */
export type RedisClient = Redis | Cluster;

/** Options of {@link createRedisClient}. */
export interface RedisClientOptions {
  /** Where connection losses and recoveries are logged (warn, info), once per loss, not per retry. */
  logger?: Logger;
  /** Names the client in those lines (`leader`, `worker`). */
  name?: string;
  /** Connect at the first command instead of at once. */
  lazyConnect?: boolean;
  /**
   * For short-lived tools (the CLI): commands fail after this many reconnect attempts instead of
   * waiting for Redis for ever, as a node's must (BullMQ needs that). Unset: wait.
   */
  failAfterRetries?: number;
}

/**
 * Reconnect delays: 50 ms more per attempt, at most 1 s. ioredis's default goes to 2 s; after a
 * Sentinel promotion every attempt beyond the first asks the Sentinels again, so a short cap is what
 * bounds the time from the promotion to the first command on the new primary.
 */
const reconnectDelay = (attempt: number) => Math.min(attempt * 50, 1_000);

/**
 * A connection still open to a demoted primary answers writes with READONLY (a Sentinel or a managed
 * Redis failed over, the old primary came back as a replica). 2 = reconnect and resend the command:
 * a Sentinel client asks the Sentinels for the primary again, a plain one reaches whatever the
 * address points at now.
 */
const reconnectOnReadOnly = (err: Error) => (err.message.startsWith('READONLY') ? 2 : false);

/**
 * ioredis's Sentinel connector without a race that ends a client for good (seen with ioredis 6.0.0).
 * The failover detector of a lost connection stays subscribed to the Sentinels while the client
 * reconnects. When the promotion's `+switch-master` arrives while a reconnect is asking a Sentinel
 * for the primary, the detector's disconnect makes that connect fail with "Connection is closed.",
 * and the client ends (status `end`): it never reconnects and every command fails. On a loaded
 * machine, where asking takes longer, that was 109-161 of 400 clients of one process
 * (bench/tools/sentinel-clients.ts), and in CI a worker's item-records connection.
 *
 * So each connect first stops the detector of the connection before it; the connection it makes
 * starts its own, as ioredis does. And a detector started for a connection closed while it was
 * still opening (a close during a reconnect) is stopped at once: ioredis would leave its Sentinel
 * subscriptions open for good. `duplicate()` (BullMQ's blocking connections) copies the `Connector`
 * option, so every connection of a client has it. It reaches ioredis's private `failoverDetector`:
 * the constructor checks that the field is there, so an ioredis that renames it fails at once.
 */
class SentinelConnectorWithoutStaleDetector extends SentinelConnector {
  /** ioredis passes the client's options, as it does to its own SentinelConnector. */
  constructor(options: unknown) {
    super(options as SentinelConnectionOptions);
    if (!('failoverDetector' in this)) throw new Error('this ioredis has no SentinelConnector.failoverDetector: see SentinelConnectorWithoutStaleDetector');
  }

  override async connect(eventEmitter: Parameters<SentinelConnector['connect']>[0]): ReturnType<SentinelConnector['connect']> {
    this.stopDetector();
    const stream = await super.connect(eventEmitter);
    // After ioredis's own listener, which starts the new detector on this event.
    const options = this.options as SentinelConnectionOptions;
    stream.once(options.enableTLSForSentinelMode && options.tls ? 'secureConnect' : 'connect', () => {
      if (!this.connecting) this.stopDetector();
    });
    return stream;
  }

  private stopDetector(): void {
    const connector = this as unknown as { failoverDetector: { cleanup(): void } | null };
    connector.failoverDetector?.cleanup();
    connector.failoverDetector = null;
  }
}

/** See `disconnectTimeout` in {@link createRedisClient}. */
const FAILOVER_DISCONNECT_MS = 250;

/** What every connection carries, whatever its topology: BullMQ refuses a client without `maxRetriesPerRequest: null`. */
const BULLMQ_OPTIONS = { maxRetriesPerRequest: null, reconnectOnError: reconnectOnReadOnly } satisfies RedisOptions;

/** The options that make a client give up after `retries` reconnects (see RedisClientOptions.failAfterRetries). */
function failFast(retries: number) {
  return { maxRetriesPerRequest: 1, retryStrategy: (attempt: number) => (attempt > retries ? null : reconnectDelay(attempt)) };
}

/**
 * Creates a client for `target`:
 * - standalone: the URL as it is;
 * - Sentinel: `{ sentinels, name }` with the URL's user, password, database and TLS, and ioredis's
 *   failover detector, so a promotion is followed at once rather than at the next connection loss;
 * - Cluster: the seed nodes, with the URL's user, password and TLS for every node (`redisOptions`).
 *   Nodes are reached at the addresses they announce (no `natMap`): right for a Cluster on one
 *   network or on loopback; behind NAT, make the nodes announce reachable addresses
 *   (`cluster-announce-ip`).
 * Commands wait for a reconnect instead of failing (`maxRetriesPerRequest: null`), and READONLY
 * replies after a failover reconnect and resend (see {@link reconnectOnReadOnly}).
 */
export function createRedisClient(target: RedisTarget, options: RedisClientOptions = {}): RedisClient {
  const parts = redisUrlParts(target);
  const lazyConnect = options.lazyConnect ?? false;
  const giveUp = options.failAfterRetries === undefined ? undefined : failFast(options.failAfterRetries);
  const credentials = {
    ...(parts.username !== undefined && { username: parts.username }),
    ...(parts.password !== undefined && { password: parts.password }),
    ...(parts.tls && { tls: {} }),
  };
  let client: RedisClient;
  switch (redisTopology(target)) {
    case 'cluster': {
      const clusterOptions: ClusterOptions = {
        redisOptions: { ...BULLMQ_OPTIONS, ...credentials, ...(giveUp && { maxRetriesPerRequest: giveUp.maxRetriesPerRequest }) },
        // CLUSTERDOWN and a failing node during a failover: retry instead of failing the command.
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 200,
        clusterRetryStrategy: giveUp?.retryStrategy ?? reconnectDelay,
        lazyConnect,
      };
      client = new Cluster(target.clusterNodes!.map((n) => ({ host: n.host, port: n.port })), clusterOptions);
      break;
    }
    case 'sentinel': {
      const { sentinels, name } = target.sentinel!;
      client = new Redis({
        ...BULLMQ_OPTIONS,
        ...credentials,
        ...(parts.tls && { enableTLSForSentinelMode: true }),
        db: parts.db,
        name,
        sentinels: sentinels.map((s) => ({ host: s.host, port: s.port })),
        failoverDetector: true,
        Connector: SentinelConnectorWithoutStaleDetector,
        // How long a detected failover waits for the old primary to close the connection before
        // dropping it (ioredis: 2 s). A hung primary never closes it; a live one does within a round trip.
        disconnectTimeout: FAILOVER_DISCONNECT_MS,
        retryStrategy: reconnectDelay,
        lazyConnect,
        ...giveUp,
      });
      break;
    }
    default:
      client = new Redis(target.url, { ...BULLMQ_OPTIONS, retryStrategy: reconnectDelay, lazyConnect, ...giveUp });
  }
  logConnectionLosses(client, target, options);
  return client;
}

/**
 * One warn line when a working connection starts failing and one info line when it is ready again;
 * the retries in between are not logged (a dead primary fails every 50-1000 ms). Without an `error`
 * listener ioredis prints every failure to the console.
 */
function logConnectionLosses(client: RedisClient, target: RedisTarget, options: RedisClientOptions): void {
  const log = (options.logger ?? silentLogger).child({ component: 'redis', client: options.name, redis: describeRedisTarget(target) });
  let lost = false;
  client.on('error', (err: Error) => {
    if (lost) return;
    lost = true;
    log.warn({ err: err.message }, 'Redis connection failing; commands wait for a reconnect');
  });
  client.on('ready', () => {
    if (!lost) return;
    lost = false;
    log.info('Redis connection ready again');
  });
}

/**
 * A standalone connection to `url`, as {@link createRedisClient} makes it. For tests and tools that
 * only have a URL.
 */
export function createRedisConnection(url: string): Redis {
  return createRedisClient({ url }) as Redis;
}
