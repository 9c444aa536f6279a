/**
 * What a generic worker (SHARDCRON_WORKER_GENERIC=script,http) runs: every job of the namespace whose
 * stored config is of a type it follows and that this process has no code for. Such a job is pure
 * data (created by `POST /api/jobs` or `shardcron jobs create`); the worker registers for it when its
 * config appears, runs the config as it is at each fire (an update takes effect at the next one), and
 * stops registering when the job is removed or its type changes.
 */
import type { GenericJobType } from '../shared/config/env-config';
import { jobConfigCodec, type JobConfig } from '../shared/config/job-config';
import { definitionFromConfig, type ResolvedJobDefinition } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import { isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import { ChildrenCache, NodeCache, type ZkClient } from '../shared/zk';
import { CoalescingRunner } from '../shared/coalescing-runner';

/** What the follower asks of the worker. */
export interface GenericJobsTarget {
  /** True when the process's own code defines `job` (its code wins). */
  definedByCode(job: string): boolean;
  /** Runs `definition` from now on (registering for it when new). */
  follow(definition: ResolvedJobDefinition): Promise<void>;
  /** Stops running `job` (unregisters). */
  unfollow(job: string): Promise<void>;
}

/** How soon a change that could not be applied (ZooKeeper unavailable) is tried again. */
const RETRY_MS = 1_000;

const TYPE_OF: Readonly<Record<GenericJobType, JobConfig['type']>> = { script: 'SCRIPT', http: 'HTTP' };

/** Follows the namespace's data-defined jobs for a generic worker. */
export class GenericJobs {
  private readonly types: ReadonlySet<string>;
  private readonly configs = new Map<string, NodeCache<JobConfig>>();
  /** Jobs followed now, and the config each was last given with. */
  private readonly followed = new Map<string, JobConfig>();
  /** Jobs whose state changed since the last sync; applied one sync at a time, in order. */
  private readonly dirty = new Set<string>();
  private readonly sync = new CoalescingRunner(
    () => this.applyChanges(),
    (err: unknown) => {
      this.log.warn({ err, retryInMs: RETRY_MS }, 'could not follow a change of the generic jobs; retrying');
      setTimeout(() => void this.sync.request(), RETRY_MS).unref();
    },
  );
  private jobsCache: ChildrenCache | undefined;
  private closed = false;

  constructor(
    private readonly zk: ZkClient,
    types: readonly GenericJobType[],
    private readonly target: GenericJobsTarget,
    private readonly log: Logger,
  ) {
    this.types = new Set(types.map((t) => TYPE_OF[t]));
  }

  /** Reads the namespace's jobs and follows those of its types; resolves once the first ones are registered. */
  async start(): Promise<void> {
    const jobs = new ChildrenCache(this.zk, { path: '/', logger: this.log });
    this.jobsCache = jobs;
    jobs.on('added', ({ name }) => void this.watch(name));
    jobs.on('removed', ({ name }) => void this.unwatch(name));
    await jobs.start();
    await Promise.all(jobs.names().map((name) => this.watch(name)));
    await this.sync.request();
  }

  /** The jobs followed now. */
  names(): string[] {
    return [...this.followed.keys()].sort();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.sync.stop();
    await Promise.allSettled([this.jobsCache?.close(), ...[...this.configs.values()].map((c) => c.close())]);
    this.configs.clear();
  }

  private async watch(name: string): Promise<void> {
    if (this.closed || !isValidJobName(name) || this.configs.has(name) || this.target.definedByCode(name)) return;
    const path = registryPaths.jobConfig(name);
    const cache = new NodeCache(this.zk, { path, decode: (data) => jobConfigCodec.decode(data, path), logger: this.log });
    this.configs.set(name, cache);
    const changed = () => {
      this.dirty.add(name);
      void this.sync.request();
    };
    cache.on('changed', changed);
    cache.on('deleted', changed);
    // An invalid config keeps the job as it was followed: the leader too keeps its last valid one.
    await cache.start();
    changed();
  }

  private async unwatch(name: string): Promise<void> {
    const cache = this.configs.get(name);
    this.configs.delete(name);
    this.dirty.add(name);
    void this.sync.request();
    await cache?.close();
  }

  /** Brings what is followed in line with the configs, job by job. */
  private async applyChanges(): Promise<void> {
    for (const name of [...this.dirty]) {
      this.dirty.delete(name);
      if (this.closed) return;
      const config = this.configs.get(name)?.value;
      const wanted = config !== undefined && this.types.has(config.type);
      const current = this.followed.get(name);
      try {
        if (wanted && current !== config) {
          await this.target.follow(definitionFromConfig(config));
          this.followed.set(name, config);
          if (!current) this.log.info({ job: name, type: config.type }, 'following a job defined by data');
        } else if (!wanted && current) {
          this.followed.delete(name);
          await this.target.unfollow(name);
          this.log.info({ job: name }, 'no longer following a job defined by data');
        }
      } catch (err) {
        this.dirty.add(name);
        throw err;
      }
    }
  }
}
