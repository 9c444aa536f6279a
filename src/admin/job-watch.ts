import { jobConfigCodec, type JobConfig } from '../shared/config/job-config';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { fireLedgerCodec, type FireLedger } from '../shared/registry/fire-ledger';
import type { InstanceDirectory } from '../shared/registry/instance-directory';
import { registryPaths } from '../shared/registry/registry-paths';
import { decodeRunningNode } from '../shared/registry/running-node';
import { ChildrenCache, NodeCache, type ChildEntry, type NodeStamp, type ZkClient } from '../shared/zk';
import type { DataProblems } from './data-problems';
import type { ItemSnapshot, JobSnapshot, LiveInstanceEntry } from './job-status';

const decodeConfig = (data: Buffer, path: string): JobConfig => jobConfigCodec.decode(data, path);
const decodeLedger = (data: Buffer, path: string): FireLedger => fireLedgerCodec.decode(data, path);
const decodeFlag = (): true => true;
const decodeText = (data: Buffer): string => data.toString('utf8');
const decodeServer = (data: Buffer, _name: string, path: string): string => {
  const status = data.toString('utf8').trim();
  if (status === 'ENABLED' || status === 'DISABLED') return status;
  throw new ShardcronError(ErrorCodes.CORRUPT_DATA, `Corrupt server status at ${path}: expected "ENABLED" or "DISABLED", got ${JSON.stringify(status.slice(0, 40))} (read as enabled, as the leader does)`, { path });
};

/** Listeners of a node cache that keep `problems` in step with what the node holds. */
function nodeListeners<T>(problems: DataProblems, path: string, onValue: (value: T | undefined) => void = () => undefined) {
  return {
    changed: ({ value }: { value: T | undefined }) => {
      problems.clear(path);
      onValue(value);
    },
    invalid: ({ error }: { error: unknown }) => problems.report(path, error),
    deleted: () => {
      problems.clear(path);
      onValue(undefined);
    },
  };
}

/** The same for a children cache that decodes its children. */
function childListeners<T>(problems: DataProblems, parent: string) {
  const valid = ({ name, data }: ChildEntry<T>) => {
    if (data !== undefined) problems.clear(`${parent}/${name}`);
  };
  return {
    added: valid,
    changed: valid,
    removed: ({ name }: ChildEntry<T>) => problems.clear(`${parent}/${name}`),
    invalid: ({ name, error }: { name: string; error: unknown }) => problems.report(`${parent}/${name}`, error),
  };
}

/**
 * The admin's watch-backed picture of one job, the read model's unit (see ReadModel for costs):
 * config, servers, the sharding flag and the ledger at once (live instances come from the shared
 * directory); the nodes of each item
 * only from the first {@link items} call on, until {@link releaseItems}. Answers come from memory.
 */
export class JobWatch {
  private readonly configCache: NodeCache<JobConfig>;
  private readonly serversCache: ChildrenCache<string>;
  private readonly necessaryCache: NodeCache<true>;
  private readonly ledgerCache: NodeCache<FireLedger>;
  /** `sharding/{i}` children (and their data) for i below the total, while items are watched. */
  private itemCaches: Array<ChildrenCache<string>> | undefined;
  /** The first load of the item caches, which the first {@link items} call waits for. */
  private itemsLoaded: Promise<unknown> | undefined;
  /** The last valid config; an invalid write keeps it (and is reported), a deletion clears it. */
  private lastValid: JobConfig | undefined;
  private startPromise: Promise<void> | undefined;
  private closed = false;
  /** Each item cache's first load (ChildrenCache's `has` answers false while it runs). */
  private readonly itemStarts = new WeakMap<ChildrenCache<string>, Promise<unknown>>();
  /** When {@link items} was last called (epoch ms), for the read model's idle release. */
  itemsReadAt = 0;

  constructor(
    private readonly zk: ZkClient,
    readonly name: string,
    private readonly problems: DataProblems,
    private readonly log: Logger,
    /** The namespace's live instances, which the read model shares between its jobs. */
    private readonly directory: InstanceDirectory,
  ) {
    const configPath = registryPaths.jobConfig(name);
    this.configCache = new NodeCache(zk, {
      path: configPath,
      decode: decodeConfig,
      logger: log,
      listeners: nodeListeners<JobConfig>(problems, configPath, (value) => this.acceptConfig(value)),
    });
    const serversPath = registryPaths.jobServers(name);
    this.serversCache = new ChildrenCache(zk, { path: serversPath, decode: decodeServer, logger: log, listeners: childListeners(problems, serversPath) });
    this.necessaryCache = new NodeCache(zk, { path: registryPaths.leaderShardingNecessary(name), decode: decodeFlag, logger: log });
    const ledgerPath = registryPaths.leaderFire(name);
    this.ledgerCache = new NodeCache(zk, { path: ledgerPath, decode: decodeLedger, logger: log, listeners: nodeListeners<FireLedger>(problems, ledgerPath) });
  }

  /** Loads the job-level nodes once and starts watching them; later calls wait for the same load. */
  start(): Promise<void> {
    return (this.startPromise ??= Promise.all([
      this.configCache.start(),
      this.serversCache.start(),
      this.necessaryCache.start(),
      this.ledgerCache.start(),
    ]).then(() => undefined));
  }

  /** Whether the config node holds something, and whether it reads: what a missing snapshot means. */
  get configState(): 'valid' | 'invalid' | 'absent' {
    if (this.lastValid) return 'valid';
    return this.configCache.exists ? 'invalid' : 'absent';
  }

  /** The job-level picture, or undefined while no valid config was read. */
  snapshot(): JobSnapshot | undefined {
    const config = this.lastValid;
    if (!config) return undefined;
    const servers = new Map<string, string>();
    for (const entry of this.serversCache.values()) servers.set(entry.name, entry.data ?? 'ENABLED');
    return {
      name: this.name,
      config,
      instances: this.instances(),
      servers,
      shardingFlagged: this.necessaryCache.exists,
      ledger: this.ledgerCache.value,
    };
  }

  /** The live instances that run the job (an instance whose entry never read is not listed; it is reported). */
  instances(): LiveInstanceEntry[] {
    return this.directory.instancesOf(this.name);
  }

  /**
   * What the nodes of each item below the total say. The first call starts watching them (one
   * read per item and per node under it); later calls answer from memory.
   */
  async items(now: number): Promise<ItemSnapshot[]> {
    this.itemsReadAt = now;
    if (!this.itemCaches) {
      this.itemCaches = [];
      this.watchItems(this.lastValid?.shardingTotalCount ?? 0);
      this.itemsLoaded = Promise.all(this.itemCaches.map((cache) => cache.settled()));
    }
    // Only the first load is awaited: later reloads (a `running` node coming or going) would make a
    // reader of a busy job wait for no benefit; it gets what the last notification brought.
    await this.itemsLoaded;
    return (this.itemCaches ?? []).map((cache, item) => {
      const running = cache.get('running');
      const holder = running?.data === undefined ? undefined : decodeRunningNode(running.data).instanceId;
      return {
        item,
        running: running !== undefined,
        runningHolder: holder || undefined,
        disabled: cache.has('disabled'),
        failover: cache.has('failover'),
        assignedInstance: cache.get('instance')?.data || undefined,
      };
    });
  }

  /** Stops watching the items (nobody looked at them for a while); the next {@link items} reads them again. */
  releaseItems(): void {
    const caches = this.itemCaches ?? [];
    this.itemCaches = undefined;
    this.itemsLoaded = undefined;
    for (const cache of caches) void cache.close();
  }

  get watchingItems(): boolean {
    return this.itemCaches !== undefined;
  }

  /** Which write of the config node was last read; undefined while it is absent or not read yet. */
  get configStamp(): NodeStamp | undefined {
    return this.configCache.stamp;
  }

  /**
   * Whether item `item`, as watched, shows `disabled` or not, once its cache's first load and any
   * load under way have ended; true while the items are not watched (their first read loads them),
   * false for an item the watched total does not have yet.
   */
  async itemShows(item: number, disabled: boolean): Promise<boolean> {
    if (!this.itemCaches) return true;
    const cache = this.itemCaches[item];
    if (!cache) return false;
    await this.itemStarts.get(cache);
    await cache.settled();
    return cache.has('disabled') === disabled;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const items = this.itemCaches ?? [];
    this.itemCaches = undefined;
    await Promise.allSettled(
      [this.configCache, this.serversCache, this.necessaryCache, this.ledgerCache, ...items].map((cache) => cache.close()),
    );
    this.problems.clearUnder(registryPaths.job(this.name));
  }

  private acceptConfig(config: JobConfig | undefined): void {
    this.lastValid = config;
    if (this.itemCaches && config) this.watchItems(config.shardingTotalCount);
  }

  /** Watches `sharding/{i}` for i below `total`, and no other item. */
  private watchItems(total: number): void {
    if (this.closed || !this.itemCaches) return;
    const current = this.itemCaches;
    for (const cache of current.slice(total)) void cache.close();
    this.itemCaches = Array.from({ length: total }, (_, item) => current[item] ?? this.watchItem(item));
  }

  private watchItem(item: number): ChildrenCache<string> {
    const cache = new ChildrenCache(this.zk, { path: registryPaths.shardingItem(this.name, item), decode: decodeText, logger: this.log });
    this.itemStarts.set(cache, cache.start().catch((err: unknown) => this.log.warn({ err, job: this.name, item }, 'could not watch sharding item')));
    return cache;
  }
}
