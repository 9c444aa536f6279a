/**
 * The console role of a node (DESIGN.md "Processes and roles"): the ops HTTP server over an Admin on
 * the node's own ZooKeeper session, with one Redis connection of its own (Bull Board's queues, the
 * execution history, queue depths, readiness). Metrics are this process's: the node's leader and
 * worker, when it has them, feed them through their events.
 */
import { Admin } from '../admin/admin';
import { within } from '../shared/concurrency';
import { isLoopbackHost } from '../shared/config/env-config';
import { OPS_TOKEN_ADVISED_LENGTH, shortTokenIssues, shortTokens } from '../shared/config/env-values';
import { jsonCodec } from '../shared/codec';
import { ConfigError, ErrorCodes } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { createRedisClient, type RedisClient } from '../shared/redis/redis-connection';
import type { RedisTarget } from '../shared/redis/redis-target';
import { queuePrefix } from '../shared/registry/queue-names';
import { registryPaths } from '../shared/registry/registry-paths';
import { NodeCache, type ZkClient } from '../shared/zk';
import { startConsole, type ConsoleServer } from './console-server';
import { HttpCodes, HttpError } from './http-errors';
import { ExecutionHistory } from './execution-history';
import { ShardcronMetrics, type LeaderEventSource, type WorkerEventSource } from './metrics';
import { closeStep } from '../shared/close-step';
import { queueDepths } from './queue-depths';
import type { Readiness } from './routes-cluster';
import { z } from 'zod';

/** How long a readiness probe or a scrape waits for Redis before it reports it down. */
const REDIS_PROBE_MS = 1_000;
/**
 * How long `GET .../executions` waits for Redis: the console's connection waits for a reconnect
 * (BullMQ's setting, which Bull Board's queues need), so without a bound a request would hang for
 * the whole outage.
 */
const REDIS_READ_MS = 5_000;

const leaderNodeCodec = jsonCodec(z.object({ instanceId: z.string() }).loose(), 'leader node');

/** Options of {@link ConsoleRole}. */
export interface ConsoleRoleOptions {
  /** The node's started client, chrooted to the namespace. */
  zk: ZkClient;
  redis: RedisTarget;
  namespace: string;
  host: string;
  /** 0: any free port (see {@link ConsoleRole.url}). */
  port: number;
  tokens: { admin?: string; read?: string };
  tracingPgUrl?: string;
  /** The node's scheduler role, if it has one: its fires, failovers and leadership are counted. */
  leader?: LeaderEventSource;
  /** The node's worker role, if it has one: its executions are counted. */
  worker?: WorkerEventSource;
  logger: Logger;
}


/** The console of one node: start(), url, close(). */
export class ConsoleRole {
  readonly metrics = new ShardcronMetrics();
  readonly admin: Admin;
  private readonly redis: RedisClient;
  private readonly history: ExecutionHistory;
  private readonly leaderNode: NodeCache<string>;
  private readonly log: Logger;
  private server: ConsoleServer | undefined;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: ConsoleRoleOptions) {
    const { host, tokens } = options;
    // env-config refuses this too; options given to startNode in code do not pass through it.
    const issues = shortTokenIssues(host, tokens);
    if (!isLoopbackHost(host) && tokens.admin === undefined) {
      issues.unshift({ field: 'SHARDCRON_OPS_TOKEN', message: `is required: the console binds the non-loopback address ${JSON.stringify(host)}; set a token (openssl rand -hex 32), or bind 127.0.0.1` });
    }
    if (issues.length > 0) throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid console options', issues);
    this.log = options.logger.child({ component: 'console' });
    for (const { field, length } of shortTokens(tokens)) {
      this.log.warn({ field, length, advised: OPS_TOKEN_ADVISED_LENGTH }, 'the console token is short and easy to guess; accepted on a loopback address only, use a longer one (openssl rand -hex 32)');
    }
    this.redis = createRedisClient(options.redis, { logger: options.logger, name: 'console', lazyConnect: true });
    const prefix = queuePrefix(options.namespace, options.redis);
    this.admin = new Admin({ zk: options.zk, redis: this.redis, queuePrefix: prefix, namespace: options.namespace, logger: options.logger });
    this.history = new ExecutionHistory({ redis: this.redis, namespace: options.namespace, logger: options.logger, ...(options.tracingPgUrl !== undefined && { tracingPgUrl: options.tracingPgUrl }) });
    this.leaderNode = new NodeCache(options.zk, { path: registryPaths.leader(), logger: this.log, decode: (data, path) => leaderNodeCodec.decode(data, path).instanceId });
    if (options.leader) this.metrics.watchLeader(options.leader);
    if (options.worker) this.metrics.watchWorker(options.worker);
    this.metrics.scrapeFrom({
      liveInstances: async () => (await this.admin.liveQueues()).length,
      queueDepths: async () => {
        const queues = await this.admin.liveQueues();
        return (await within(queueDepths(this.redis, prefix, queues), REDIS_PROBE_MS)) ?? new Map();
      },
    });
  }

  /** `http://host:port` once started. */
  get url(): string {
    if (!this.server) throw new Error('the console is not started');
    return this.server.url;
  }

  /** Loads the read model and the leader node, then listens. */
  async start(): Promise<this> {
    const { options } = this;
    this.redis.connect().catch((err: unknown) => this.log.warn({ err }, 'console: Redis not reachable yet; retrying'));
    await Promise.all([this.admin.readModel().start(), this.leaderNode.start()]);
    this.server = await startConsole({
      admin: this.admin,
      host: options.host,
      port: options.port,
      tokens: options.tokens,
      log: options.logger,
      metrics: this.metrics,
      readiness: () => this.readiness(),
      executions: async (job, query) => {
        const records = await within(this.history.recent(job, query), REDIS_READ_MS);
        if (!records) throw new HttpError(503, HttpCodes.UNAVAILABLE, `Redis did not answer within ${REDIS_READ_MS} ms (see /readyz); try again`);
        return records;
      },
      lastExecutions: (jobs) => this.history.lastOf(jobs),
      createJob: async (body, requestedBy) => {
        const config = await this.admin.createJob(body, { requestedBy });
        return { name: config.name, config };
      },
      bullBoard: { connection: this.redis, prefix: queuePrefix(options.namespace, options.redis), liveQueues: () => this.admin.liveQueues() },
    });
    return this;
  }

  /** ZooKeeper's session state, a Redis PING within a second, the leader's instance id (`none`). */
  async readiness(): Promise<Readiness> {
    const pong = await within(
      this.redis.ping().catch(() => undefined),
      REDIS_PROBE_MS,
    );
    return {
      zookeeper: this.options.zk.state === 'connected' ? 'ok' : 'down',
      redis: pong === 'PONG' ? 'ok' : 'down',
      leader: this.leaderNode.value ?? 'none',
    };
  }

  /** Stops listening, then closes the history, the admin's read model and the Redis connection; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= (async () => {
      const steps: Array<[string, () => Promise<unknown>]> = [
        ['http server', async () => this.server?.close()],
        ['history', () => this.history.close()],
        ['admin', () => this.admin.close()],
        ['leader watch', () => this.leaderNode.close()],
        ['redis', async () => this.redis.disconnect()],
      ];
      for (const [step, run] of steps) await closeStep(`console ${step}`, run, this.log);
    })());
  }
}
