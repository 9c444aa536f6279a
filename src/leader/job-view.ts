import { type JobConfig, jobConfigCodec } from '../shared/job-config';
import { instanceInfoCodec, type InstanceInfo } from '../shared/instance-info';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import { TypedEmitter } from '../shared/typed-emitter';
import { ChildrenCache, NodeCache, type ZkClient } from '../shared/zk';

/** A live instance that can receive items of this job. */
export interface LiveInstance {
  instanceId: string;
  info: InstanceInfo;
}

export interface JobViewEvents {
  [event: string]: object;
  /** A new valid config was read (also the first one). */
  'config:changed': { config: JobConfig; previous: JobConfig | undefined };
  /** The config node holds something invalid; the last valid config stays in force. */
  'config:invalid': { error: unknown };
  /** Something that changes the assignment happened (instances, servers, total, flag). */
  'reshard:needed': { reason: string };
  /** An instance node vanished (session gone or clean shutdown). */
  'instance:removed': LiveInstance;
  /** An instance switched to `draining`: its waiting requests must move. */
  'instance:draining': LiveInstance;
}

/** Flags under `sharding/{i}` that the leader acts on. */
export interface ItemFlags {
  running: boolean;
  disabled: boolean;
}

/**
 * The leader's always-current picture of one job's subtree: config, live instances, server
 * switches and per-item flags, each a watch-backed cache. Reading it costs no ZooKeeper round
 * trip, which keeps the fire path free of reads.
 */
export class JobView extends TypedEmitter<JobViewEvents> {
  private readonly configCache: NodeCache<JobConfig>;
  private readonly instancesCache: ChildrenCache<InstanceInfo>;
  private readonly serversCache: ChildrenCache<string>;
  private readonly shardingCache: ChildrenCache;
  private readonly necessaryCache: NodeCache<true>;
  private readonly itemCaches = new Map<number, ChildrenCache>();
  private lastValid: JobConfig | undefined;
  private closed = false;

  constructor(
    private readonly zk: ZkClient,
    readonly job: string,
    private readonly log: Logger,
  ) {
    super(log);
    const configPath = registryPaths.jobConfig(job);
    this.configCache = new NodeCache(zk, { path: configPath, decode: (d) => jobConfigCodec.decode(d, configPath), logger: log });
    this.instancesCache = new ChildrenCache(zk, {
      path: registryPaths.jobInstances(job),
      decode: (d, name) => instanceInfoCodec.decode(d, registryPaths.jobInstance(job, name)),
      logger: log,
    });
    this.serversCache = new ChildrenCache(zk, { path: registryPaths.jobServers(job), decode: (d) => d.toString('utf8').trim(), logger: log });
    this.shardingCache = new ChildrenCache(zk, { path: registryPaths.jobSharding(job), logger: log });
    this.necessaryCache = new NodeCache(zk, { path: registryPaths.leaderShardingNecessary(job), decode: () => true as const, logger: log });
  }

  async start(): Promise<this> {
    this.configCache.on('changed', ({ value }) => value && this.acceptConfig(value));
    this.configCache.on('invalid', ({ error }) => {
      this.log.error({ err: error, job: this.job }, 'invalid job config in ZooKeeper; keeping the last valid one');
      this.emit('config:invalid', { error });
    });
    const reshard = (reason: string) => () => this.emit('reshard:needed', { reason });
    this.instancesCache.on('added', reshard('instance joined'));
    this.instancesCache.on('removed', (entry) => {
      this.emit('reshard:needed', { reason: 'instance left' });
      if (entry.data) this.emit('instance:removed', { instanceId: entry.name, info: entry.data });
    });
    this.instancesCache.on('changed', (entry) => {
      this.emit('reshard:needed', { reason: 'instance changed' });
      if (entry.data?.state === 'draining') this.emit('instance:draining', { instanceId: entry.name, info: entry.data });
    });
    this.serversCache.on('added', reshard('server added'));
    this.serversCache.on('changed', reshard('server enabled/disabled'));
    this.serversCache.on('removed', reshard('server removed'));
    this.necessaryCache.on('changed', reshard('sharding flag set'));
    this.shardingCache.on('added', ({ name }) => void this.watchItem(name));
    this.shardingCache.on('removed', ({ name }) => void this.unwatchItem(name));
    await Promise.all([
      this.configCache.start(),
      this.instancesCache.start(),
      this.serversCache.start(),
      this.shardingCache.start(),
      this.necessaryCache.start(),
    ]);
    await Promise.all(this.shardingCache.names().map((name) => this.watchItem(name)));
    const value = this.configCache.value;
    if (value && !this.lastValid) this.acceptConfig(value);
    return this;
  }

  /** The last valid config, or undefined when none was ever read. */
  get config(): JobConfig | undefined {
    return this.lastValid;
  }

  /** True when the persistent `leader/sharding/necessary` flag exists. */
  get shardingFlagged(): boolean {
    return this.necessaryCache.exists;
  }

  /**
   * Instances that may receive items: live, not draining, on a server not DISABLED; sorted by IP
   * (numeric) then id, the order ElasticJob shards in, so results move as little as possible.
   */
  eligibleInstances(): LiveInstance[] {
    const disabledIps = new Set(this.serversCache.values().filter((s) => s.data === 'DISABLED').map((s) => s.name));
    return this.liveInstances().filter((i) => i.info.state === 'ready' && !disabledIps.has(i.info.ip));
  }

  /** Every live instance with readable data, whatever its state. */
  liveInstances(): LiveInstance[] {
    const out: LiveInstance[] = [];
    for (const entry of this.instancesCache.values()) {
      if (entry.data) out.push({ instanceId: entry.name, info: entry.data });
    }
    return out;
  }

  instance(instanceId: string): InstanceInfo | undefined {
    return this.instancesCache.get(instanceId)?.data;
  }

  itemFlags(item: number): ItemFlags {
    const cache = this.itemCaches.get(item);
    if (!cache) return { running: false, disabled: false };
    const names = new Set(cache.names());
    return { running: names.has('running'), disabled: names.has('disabled') };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([
      this.configCache.close(),
      this.instancesCache.close(),
      this.serversCache.close(),
      this.shardingCache.close(),
      this.necessaryCache.close(),
      ...[...this.itemCaches.values()].map((c) => c.close()),
    ]);
    this.itemCaches.clear();
    this.removeAllListeners();
  }

  private acceptConfig(config: JobConfig): void {
    const previous = this.lastValid;
    this.lastValid = config;
    this.emit('config:changed', { config, previous });
    if (previous && previous.shardingTotalCount !== config.shardingTotalCount) {
      this.emit('reshard:needed', { reason: 'shardingTotalCount changed' });
    }
    if (previous && previous.shardingStrategy !== config.shardingStrategy) {
      this.emit('reshard:needed', { reason: 'shardingStrategy changed' });
    }
  }

  private async watchItem(name: string): Promise<void> {
    const item = Number(name);
    if (this.closed || !Number.isSafeInteger(item) || item < 0 || String(item) !== name || this.itemCaches.has(item)) return;
    const cache = new ChildrenCache(this.zk, { path: registryPaths.shardingItem(this.job, item), logger: this.log });
    this.itemCaches.set(item, cache);
    await cache.start().catch((err) => this.log.warn({ err, item }, 'could not watch sharding item'));
  }

  private async unwatchItem(name: string): Promise<void> {
    const item = Number(name);
    const cache = this.itemCaches.get(item);
    this.itemCaches.delete(item);
    await cache?.close();
  }
}
