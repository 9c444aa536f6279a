import * as os from 'node:os';
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, hasCode, ShardcronError } from '../shared/errors';
import { instanceInfoCodec, type InstanceInfo, type InstanceState } from '../shared/registry/instance-info';
import { jobConfigCodec, type JobConfig } from '../shared/config/job-config';
import { ScheduleCache } from '../shared/cron/schedule-cache';
import type { ResolvedJobDefinition } from '../shared/config/job-definition';
import type { Logger } from '../shared/logger';
import { instanceQueueName } from '../shared/registry/queue-names';
import { registryPaths } from '../shared/registry/registry-paths';
import { ZkError, type ZkClient } from '../shared/zk';
import { assertClockSkew, measureClockSkewMs } from './clock-check';

/** Jobs whose nodes are written at once while registering: enough to fill the pipe, not to flood it. */
const JOBS_REGISTERED_AT_ONCE = 256;
/** Jobs whose instance nodes are created together, once their other nodes are written. */
const JOBS_PER_GROUP = 1_000;

/**
 * Instance nodes created per transaction: one multi of 100 creates instead of 100 requests (each a
 * transaction ZooKeeper logs). Small enough for ZooKeeper's 1 MB request limit with long job names.
 */
const INSTANCE_NODES_PER_MULTI = 100;

/** shardcron's version, written into instance nodes so a mixed fleet can be told apart. */
export const SHARDCRON_VERSION: string = (require('../../package.json') as { version: string }).version;

/** The first non-internal IPv4 address of this host (ElasticJob's choice), else loopback. */
export function detectIp(): string {
  for (const addresses of Object.values(os.networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/**
 * `entries` ordered by their job's next fire after `now`, soonest first; jobs without a cron (run by
 * triggers only) or with an expression that does not parse go last, in their order. A joining worker's
 * instance nodes reach the leader in this order, and its job views reload one slot at a time: of
 * 100,000 jobs, the every-second ones now get items from the new worker at their next fire instead of
 * after the hourly ones were all seen.
 */
export function soonestFirst<T>(entries: readonly T[], config: (entry: T) => Pick<JobConfig, 'cron' | 'timeZone'>, now: number): T[] {
  const schedules = new ScheduleCache();
  const nextFire = (entry: T): number => {
    const { cron, timeZone } = config(entry);
    if (!cron) return Number.POSITIVE_INFINITY;
    try {
      return schedules.get(cron, timeZone).next(now) ?? Number.POSITIVE_INFINITY;
    } catch {
      return Number.POSITIVE_INFINITY;
    }
  };
  const keyed = entries.map((entry, index) => ({ entry, index, at: nextFire(entry) }));
  keyed.sort((a, b) => a.at - b.at || a.index - b.index);
  return keyed.map(({ entry }) => entry);
}

/** What a registration produced: the incarnation's queue. */
export interface Incarnation {
  sessionId: string;
  queue: string;
}

/**
 * Registers this worker for its jobs (DESIGN.md flow 1): writes each job's config if absent (or
 * if `overwrite`), ensures `servers/{ip}`, and creates the ephemeral `instances/{instanceId}` node
 * carrying the queue of this incarnation. Each ZooKeeper session is a new incarnation with a new
 * queue, so requests sent to a previous incarnation can never reach this one by mistake.
 */
export class InstanceRegistration {
  private state: InstanceState = 'ready';
  private current: Incarnation | undefined;
  private readonly previousSessions = new Set<string>();

  /** The jobs registered for: those of the code, then those a generic worker follows (see {@link add}). */
  private readonly jobs = new Map<string, { definition: ResolvedJobDefinition; fromData: boolean }>();

  constructor(
    private readonly zk: ZkClient,
    private readonly options: {
      namespace: string;
      instanceId: string;
      ip: string;
      jobs: readonly ResolvedJobDefinition[];
      log: Logger;
      /**
       * True when the job's config is stored, as the worker's watch of it read it: the registration
       * then needs no read of its own to know. False also when not known.
       */
      configStored?: (job: string) => Promise<boolean>;
    },
  ) {
    for (const definition of options.jobs) this.jobs.set(definition.name, { definition, fromData: false });
  }

  private get definitions(): ResolvedJobDefinition[] {
    return [...this.jobs.values()].map((j) => j.definition);
  }

  get incarnation(): Incarnation | undefined {
    return this.current;
  }

  /** The queue of the incarnation {@link register}, called now, makes (it reads the session before its first wait). */
  nextQueue(): string {
    return instanceQueueName(this.options.namespace, this.options.instanceId, this.zk.sessionId);
  }

  /**
   * Writes configs and servers, then the instance nodes; returns the new incarnation. The jobs that
   * fire soonest go first (see soonestFirst), and their instance nodes are created as soon as their
   * nodes are written, a group at a time, not after all the others': with 100,000 jobs, the leader
   * can give the new instance items of its every-second jobs while the hourly ones still register.
   */
  async register(): Promise<Incarnation> {
    const sessionId = this.zk.sessionId;
    if (this.current && this.current.sessionId !== sessionId) this.previousSessions.add(this.current.sessionId);
    const queue = instanceQueueName(this.options.namespace, this.options.instanceId, sessionId);
    await this.checkClock();
    const info = this.info(queue);
    const jobs = soonestFirst([...this.jobs.values()], ({ definition }) => definition.config, Date.now());
    const instanceNodes: Array<Promise<void>> = [];
    let failure: { error: unknown } | undefined;
    try {
      for (let i = 0; i < jobs.length; i += JOBS_PER_GROUP) {
        const group = jobs.slice(i, i + JOBS_PER_GROUP);
        // Several jobs at a time: one after another, each job's few round trips made a worker of
        // 10,000 jobs take minutes to register (issue 23); ZooKeeper pipelines a session's requests.
        await forEachLimited(group, JOBS_REGISTERED_AT_ONCE, ({ definition, fromData }) => this.writeJob(definition, fromData));
        instanceNodes.push(this.createInstanceNodes(group.map(({ definition }) => definition.name), info));
      }
    } catch (error) {
      failure = { error };
    }
    // Every group's creates end (or fail) before the registration does; the first failure is told.
    for (const result of await Promise.allSettled(instanceNodes)) if (result.status === 'rejected') failure ??= { error: result.reason };
    if (failure) throw failure.error;
    this.current = { sessionId, queue };
    this.options.log.info({ queue, jobs: [...this.jobs.keys()] }, 'instance registered');
    return this.current;
  }

  /**
   * Registers for one more job, defined by its stored config (a generic worker's SCRIPT or HTTP
   * job): its server and instance nodes, never its config, which belongs to whoever stored it (a
   * config written back here could bring a removed job back).
   */
  async add(definition: ResolvedJobDefinition): Promise<void> {
    this.jobs.set(definition.name, { definition, fromData: true });
    const current = this.current;
    if (!current) return;
    await this.writeJob(definition, true);
    await this.createInstanceNode(definition.name, this.info(current.queue));
  }

  /** Stops registering for `job` and deletes its instance node (the leader gives its items to others). */
  async remove(job: string): Promise<void> {
    if (!this.jobs.delete(job) || !this.current) return;
    await this.zk.delete(registryPaths.jobInstance(job, this.options.instanceId)).catch((err) => {
      if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
    });
  }

  /** Marks the instance `draining` (the leader stops giving it items) or `ready` again. */
  async setState(state: InstanceState): Promise<void> {
    this.state = state;
    const current = this.current;
    if (!current) return;
    const data = instanceInfoCodec.encode(this.info(current.queue));
    await Promise.all(
      this.definitions.map((job) =>
        this.zk.set(registryPaths.jobInstance(job.name, this.options.instanceId), data).catch((err) =>
          this.options.log.warn({ err, job: job.name }, 'could not update the instance node'),
        ),
      ),
    );
  }

  /** Deletes the instance nodes now (a clean shutdown), so the leader reacts without waiting for expiry. */
  async unregister(): Promise<void> {
    if (!this.current || this.zk.state !== 'connected') return;
    await Promise.allSettled(this.definitions.map((job) => this.zk.delete(registryPaths.jobInstance(job.name, this.options.instanceId))));
    this.current = undefined;
  }

  /** Refuses to register when the clock is off by more than a job's maxTimeDiffSeconds. */
  private async checkClock(): Promise<void> {
    const jobs = this.definitions;
    if (!jobs.some((j) => j.maxTimeDiffSeconds > 0)) return;
    const probe = `${registryPaths.clusterRoot()}/clock`;
    await this.zk.ensurePath(probe);
    const skewMs = await measureClockSkewMs(this.zk, probe);
    this.options.log.info({ skewMs }, 'clock compared with ZooKeeper');
    assertClockSkew(jobs, skewMs);
  }

  private info(queue: string): InstanceInfo {
    return {
      ip: this.options.ip,
      pid: process.pid,
      hostname: os.hostname(),
      queue,
      state: this.state,
      version: SHARDCRON_VERSION,
      startedAt: Date.now(),
    };
  }

  /**
   * `fireListeners` says what the job's code has, not a setting: a config stored before the code had
   * once-per-fire listeners gets it (only it; the stored settings still win), or the leader would
   * never tell the requests their fire's size and the listeners would never run. Never removed here:
   * another instance may still run code with listeners. A write that meets another one is left to it.
   */
  private async announceFireListeners(job: string, configPath: string): Promise<void> {
    try {
      const { data, stat } = await this.zk.get(configPath);
      const stored = jobConfigCodec.decode(data, configPath);
      if (stored.fireListeners) return;
      await this.zk.set(configPath, jobConfigCodec.encode({ ...stored, fireListeners: true }), stat.version);
      this.options.log.info({ job }, 'stored config marked fireListeners: the job\'s code has beforeFire/afterFire');
    } catch (err) {
      this.options.log.warn({ err, job }, 'could not mark the stored config fireListeners; beforeFire/afterFire run once it is');
    }
  }

  private async writeJob(job: ResolvedJobDefinition, fromData: boolean): Promise<void> {
    const configPath = registryPaths.jobConfig(job.name);
    const serverPath = registryPaths.jobServer(job.name, this.options.ip);
    // A worker joining a namespace finds these nodes there. Asked with exists, a read ZooKeeper
    // answers from memory, not with a create that fails: that is a transaction the server logs
    // (and, with forceSync, syncs to disk) for each of a job's nodes. `instances/` is not asked: it
    // is there whenever the config is, and an instance node's create that misses it makes it.
    const configKnown = fromData || (await this.options.configStored?.(job.name)) === true;
    const [configThere, serverThere] = await Promise.all([configKnown ? true : this.zk.exists(configPath), this.zk.exists(serverPath)]);
    // A job new to the namespace: its nodes in one transaction instead of five (the job node and
    // `servers/` made by the creates' parent path before). Any of them there already (another worker
    // registering the same job right now) fails the whole multi; the path below then sorts it out.
    if (!fromData && !configThere && !serverThere && (await this.createJobNodes(job, configPath, serverPath))) return;
    if (!fromData) {
      // Encoded (and validated) only when written: a joining worker writes none of its 100,000 configs.
      const created = !configThere && (await this.createUnlessExists(configPath, jobConfigCodec.encode(job.config)));
      // The stored config wins unless this definition says overwrite (ElasticJob's rule).
      if (!created && job.overwrite) await this.zk.set(configPath, jobConfigCodec.encode(job.config));
      else if (!created && job.config.fireListeners) await this.announceFireListeners(job.name, configPath);
    }
    if (!serverThere) await this.createUnlessExists(serverPath, 'ENABLED');
  }

  /** Creates a new job's nodes (job, config, servers, server, instances) in one multi; false when it failed. */
  private async createJobNodes(job: ResolvedJobDefinition, configPath: string, serverPath: string): Promise<boolean> {
    // fireListeners needs no announcement here: the config written is this definition's own.
    try {
      await this.zk
        .multi()
        .create(registryPaths.job(job.name), '')
        .create(configPath, jobConfigCodec.encode(job.config))
        .create(registryPaths.jobServers(job.name), '')
        .create(serverPath, 'ENABLED')
        .create(registryPaths.jobInstances(job.name), '')
        .commit();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Creates a persistent node; false when it exists. Its parents are made only when missing: a
   * worker restarting finds them all, and mkdirp's create per path segment, for each of a job's
   * nodes, was most of the time 10,000 jobs took to register.
   */
  private async createUnlessExists(path: string, data: string | Buffer): Promise<boolean> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.zk.create(path, data);
        return true;
      } catch (err) {
        if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) return false;
        if (!hasCode(err, ErrorCodes.ZK_NO_NODE) || attempt > 0) throw err;
      }
      await this.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
    }
  }

  /**
   * Creates the ephemeral instance nodes of `jobs`, {@link INSTANCE_NODES_PER_MULTI} to a multi. A
   * multi is all or nothing: when one of its nodes is there already (left by an earlier session),
   * its jobs are registered one by one, which handles that case.
   */
  private async createInstanceNodes(jobs: readonly string[], info: InstanceInfo): Promise<void> {
    const data = instanceInfoCodec.encode(info);
    const chunks: string[][] = [];
    for (let i = 0; i < jobs.length; i += INSTANCE_NODES_PER_MULTI) chunks.push(jobs.slice(i, i + INSTANCE_NODES_PER_MULTI));
    await Promise.all(chunks.map(async (chunk) => {
      const multi = this.zk.multi();
      for (const job of chunk) multi.create(registryPaths.jobInstance(job, this.options.instanceId), data, 'ephemeral');
      try {
        await multi.commit();
      } catch {
        await Promise.all(chunk.map((job) => this.createInstanceNode(job, info)));
      }
    }));
  }

  /**
   * Creates the ephemeral instance node. A node left by one of our previous sessions (still alive
   * on the server until it expires) is replaced; one owned by a session we do not know means another
   * live process uses the same instance id, which would break every guarantee: refuse.
   */
  private async createInstanceNode(job: string, info: InstanceInfo): Promise<void> {
    const path = registryPaths.jobInstance(job, this.options.instanceId);
    const data = instanceInfoCodec.encode(info);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        await this.zk.create(path, data, 'ephemeral');
        return;
      } catch (err) {
        if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) {
          // The job's `instances/` is missing (a job node made by another tool): make it, then again.
          await this.createUnlessExists(registryPaths.jobInstances(job), '');
          continue;
        }
        if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NODE_EXISTS)) throw err;
      }
      const stat = await this.zk.exists(path);
      if (!stat) continue;
      if (stat.ephemeralOwner === this.zk.sessionId) {
        await this.zk.set(path, data);
        return;
      }
      if (this.previousSessions.has(stat.ephemeralOwner)) {
        await this.zk.delete(path, stat.version).catch(() => undefined);
        continue;
      }
      // Maybe our own previous process (restarted with a fixed id): its session expires soon.
      if (attempt === 0 && (await this.waitForDeletion(path, this.zk.negotiatedSessionTimeoutMs * 1.5))) continue;
      throw new ShardcronError(
        ErrorCodes.INVALID_CONFIG,
        `Instance id ${this.options.instanceId} is already registered for job ${job} by another live process ` +
          `(session ${stat.ephemeralOwner}). Give each process its own SHARDCRON_INSTANCE_ID.`,
        { job, instanceId: this.options.instanceId, field: 'SHARDCRON_INSTANCE_ID' },
      );
    }
  }

  /** Resolves true once `path` is gone, false after `timeoutMs`. */
  private waitForDeletion(path: string, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (gone: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(gone);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      const check = (): void => {
        void this.zk
          .exists(path, (event) => event.type === 'deleted' && finish(true))
          .then((stat) => !stat && finish(true))
          .catch(() => finish(false));
      };
      check();
    });
  }
}
