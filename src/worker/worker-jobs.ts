/**
 * The jobs a worker runs and what it watches of each: its code's jobs with their stored configs, the
 * streaming flag of its DATAFLOW jobs, and, on a generic worker, the jobs defined by data it follows
 * (see generic-jobs.ts). Each run reads the config current when it starts.
 */
import type { GenericJobType } from '../shared/config/env-config';
import { jobConfigCodec, type JobConfig } from '../shared/config/job-config';
import type { ResolvedJobDefinition } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry/registry-paths';
import { NodeCache, type ZkClient } from '../shared/zk';
import { GenericJobs, type GenericJobsTarget } from './generic-jobs';
import { soonestFirst, type InstanceRegistration } from './instance-registration';

export interface WorkerJobsOptions {
  zk: ZkClient;
  /** The jobs of the worker's code. */
  jobs: readonly ResolvedJobDefinition[];
  /** The data-defined job types to follow (SHARDCRON_WORKER_GENERIC); none by default. */
  generic?: readonly GenericJobType[];
  registration: InstanceRegistration;
  /** What the worker remembers of a job's items is void (the job was removed, added again, or let go). */
  forget(job: string): void;
  log: Logger;
}

/** The worker's jobs: definitions, stored configs, streaming flags and the generic follower. */
export class WorkerJobs {
  /** The code's jobs, then the data-defined ones followed. */
  private readonly definitions: Map<string, ResolvedJobDefinition>;
  private readonly configCaches = new Map<string, NodeCache<JobConfig>>();
  /** `leader/sharding/necessary` of each DATAFLOW job: a streaming run stops fetching once it is set. */
  private readonly reshardFlags = new Map<string, NodeCache<true>>();
  /** Configs of data-defined jobs no longer followed: a run of one under way when it went still reads its config. */
  private readonly unfollowedConfigs = new Map<string, JobConfig>();
  private generic: GenericJobs | undefined;
  /** The first reads of the code's jobs' nodes still under way, by job. */
  private readonly unread = new Map<string, Promise<unknown>>();

  constructor(private readonly options: WorkerJobsOptions) {
    const { zk, jobs, log } = options;
    this.definitions = new Map(jobs.map((d) => [d.name, d]));
    for (const job of jobs) {
      const path = registryPaths.jobConfig(job.name);
      const cache = new NodeCache(zk, { path, decode: (d) => jobConfigCodec.decode(d, path), logger: log });
      // A job removed, or added again (a new config node, seen even across a disconnection), starts
      // over: what we remember of its items is void.
      let created: string | undefined;
      cache.on('deleted', () => options.forget(job.name));
      cache.on('changed', ({ stat }) => {
        if (created !== undefined && stat.czxid !== created) options.forget(job.name);
        created = stat.czxid;
      });
      this.configCaches.set(job.name, cache);
      if (job.type === 'DATAFLOW') {
        this.reshardFlags.set(job.name, new NodeCache(zk, { path: registryPaths.leaderShardingNecessary(job.name), decode: () => true as const, logger: log }));
      }
    }
  }

  /**
   * Starts the watches of the code's jobs, the soonest to fire first, beside the registration, which
   * does not wait for them ({@link configRead}, {@link configStored}). Resolves once all loaded.
   */
  async watch(): Promise<void> {
    const order = soonestFirst([...this.definitions.values()], (definition) => definition.config, Date.now());
    await Promise.all(
      order.map(({ name }) => {
        const read = Promise.all([this.configCaches.get(name)?.start(), this.reshardFlags.get(name)?.start()]);
        this.unread.set(name, read);
        return read.finally(() => this.unread.delete(name));
      }),
    );
  }

  /**
   * The first read of the job's stored config while it is under way, else undefined: a request of a
   * job whose config was not read yet waits for it (a worker of 100,000 jobs is registered before it
   * has read them all), and runs with what is stored rather than with its definition.
   */
  configRead(job: string): Promise<unknown> | undefined {
    return this.unread.get(job);
  }

  /** True when the job's config is stored, as its watch read it once its load in progress ended; false also when not watched. */
  async configStored(job: string): Promise<boolean> {
    const cache = this.configCaches.get(job);
    await cache?.settled();
    return cache?.exists === true;
  }

  /** Follows the data-defined jobs (once the instance is registered). */
  async start(): Promise<void> {
    const { generic, zk, log } = this.options;
    if (generic && generic.length > 0) {
      this.generic = new GenericJobs(zk, generic, this.genericTarget(), log);
      await this.generic.start();
    }
  }

  /** The definition the worker runs `job` with, if it runs it. */
  definition(job: string): ResolvedJobDefinition | undefined {
    return this.definitions.get(job);
  }

  /** A job's config as ZooKeeper has it, or as defined until it was read. */
  config(job: string): JobConfig {
    return this.configCaches.get(job)?.value ?? this.definitions.get(job)?.config ?? this.unfollowedConfigs.get(job)!;
  }

  /** True when the leader flagged the job for resharding (a streaming run then stops fetching). */
  reshardingPending(job: string): boolean {
    return this.reshardFlags.get(job)?.exists === true;
  }

  /** The data-defined jobs followed now (generic workers); sorted. */
  genericNames(): string[] {
    return this.generic?.names() ?? [];
  }

  /** Stops following data-defined jobs (before the instance unregisters). */
  async stopFollowing(): Promise<void> {
    await this.generic?.close();
  }

  async close(): Promise<void> {
    await this.stopFollowing();
    await Promise.allSettled([...this.configCaches.values(), ...this.reshardFlags.values()].map((c) => c.close()));
  }

  /** How the generic-jobs follower adds, updates and drops the jobs it runs. */
  private genericTarget(): GenericJobsTarget {
    const { registration, forget } = this.options;
    return {
      definedByCode: (job) => this.configCaches.has(job),
      follow: async (definition) => {
        const isNew = !this.definitions.has(definition.name);
        // Replaced as a whole: each run reads the config of the definition current when it starts.
        this.definitions.set(definition.name, definition);
        this.unfollowedConfigs.delete(definition.name);
        if (isNew) await registration.add(definition);
      },
      unfollow: async (job) => {
        const definition = this.definitions.get(job);
        if (definition) this.unfollowedConfigs.set(job, definition.config);
        this.definitions.delete(job);
        forget(job);
        await registration.remove(job);
      },
    };
  }
}
