import * as os from 'node:os';
import { forEachLimited, within } from '../shared/concurrency';
import { CoalescingRunner } from '../shared/coalescing-runner';
import { ErrorCodes, hasCode, ShardcronError } from '../shared/errors';
import { instanceEntryCodec, type InstanceEntryData, type InstanceInfo, type InstanceState } from '../shared/registry/instance-info';
import { buildJobList, deleteJobList, writeJobList } from '../shared/registry/job-lists';
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
/** How long a close waits for a registration under way before it goes on (see registrationSettled). */
const REGISTRATION_SETTLE_MS = 5_000;
/** Server nodes made at once after the registration, beside the worker's first runs. */
const SERVERS_AT_ONCE = 64;
/** A failed update of the instance entry (a new list, a state) is tried again after this. */
const UPDATE_RETRY_MS = 1_000;

const closedError = (): ShardcronError => new ShardcronError(ErrorCodes.CLOSED, 'the instance is closing: not registered again');

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
 * triggers only) or with an expression that does not parse go last, in their order. A worker writes
 * new jobs and watches its configs in this order, so the every-second jobs are ready first.
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
 * Registers this worker for its jobs (DESIGN.md flow 1, with the instance layout of
 * docs/design-notes.md, "One instance entry per worker"): writes the config of each job new to the
 * namespace (or of one whose definition says `overwrite`), then one ephemeral entry,
 * `/.cluster/instances/{instanceId}`, carrying the queue of this incarnation and the list of the
 * jobs it runs. Each ZooKeeper session is a new incarnation with a new queue, so requests sent to a
 * previous incarnation can never reach this one by mistake. Each job's `servers/{ip}` follows, made
 * beside the first runs: a missing one reads as ENABLED.
 */
export class InstanceRegistration {
  private state: InstanceState = 'ready';
  private current: Incarnation | undefined;
  private readonly previousSessions = new Set<string>();
  /** The entry written for the current incarnation. */
  private published: InstanceEntryData | undefined;
  /** Brings the entry in line with the jobs and the state (one run at a time, coalesced). */
  private readonly updates: CoalescingRunner;
  private retry: NodeJS.Timeout | undefined;
  /** The server nodes (and configs a listing could not tell) made after the registration. */
  private background: Promise<void> | undefined;
  private stopped = false;
  /** No registration starts, and one under way stops at its next step ({@link stopRegistering}). */
  private refusing = false;
  /** The registration under way, which {@link unregister} waits for: it would write the entry after the delete. */
  private registering: Promise<Incarnation> | undefined;

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
       * True when the job's config is stored, as the worker's watch of it read it: what tells a job
       * node without a config (another tool's, or a removal under way) after the registration.
       */
      configStored?: (job: string) => Promise<boolean>;
    },
  ) {
    for (const definition of options.jobs) this.jobs.set(definition.name, { definition, fromData: false });
    this.updates = new CoalescingRunner(
      () => this.update(),
      (err) => {
        this.options.log.warn({ err }, 'could not update the instance entry; trying again');
        this.retryUpdate();
      },
    );
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
   * Writes the configs of jobs new to the namespace, then the job list and the instance entry;
   * returns the new incarnation. One listing of the namespace tells which jobs are new: a worker
   * joining a namespace of 100,000 jobs reads nothing per job before it is registered.
   */
  register(): Promise<Incarnation> {
    if (this.refusing) return Promise.reject(closedError());
    const registering = this.doRegister();
    this.registering = registering;
    void registering.catch(() => undefined).finally(() => {
      if (this.registering === registering) this.registering = undefined;
    });
    return registering;
  }

  private async doRegister(): Promise<Incarnation> {
    const sessionId = this.zk.sessionId;
    if (this.current && this.current.sessionId !== sessionId) this.previousSessions.add(this.current.sessionId);
    const queue = instanceQueueName(this.options.namespace, this.options.instanceId, sessionId);
    await this.checkClock();
    const listed = new Set(await this.zk.children('/'));
    this.assertRegistering();
    // Configs to write: a new job's, one whose definition overwrites, one announcing fire listeners
    // (a joining worker has none of them). Several at a time, soonest to fire first: one after
    // another, a worker of 10,000 new jobs took minutes (issue 23); a session pipelines requests.
    const writes = [...this.jobs.values()].filter(
      ({ definition, fromData }) => !fromData && (!listed.has(definition.name) || definition.overwrite || definition.config.fireListeners),
    );
    await forEachLimited(soonestFirst(writes, ({ definition }) => definition.config, Date.now()), JOBS_REGISTERED_AT_ONCE, ({ definition }) =>
      this.writeConfig(definition, listed.has(definition.name)),
    );
    this.assertRegistering();
    const { ref, parts } = buildJobList([...this.jobs.keys()], sessionId);
    await writeJobList(this.zk, ref, parts);
    this.assertRegistering();
    const entry = { ...this.info(queue), jobs: ref };
    await this.createEntry(instanceEntryCodec.encode(entry));
    const before = this.published;
    this.published = entry;
    this.current = { sessionId, queue };
    if (before && before.jobs.list !== ref.list) void deleteJobList(this.zk, before.jobs);
    this.options.log.info({ queue, jobs: this.jobs.size, list: ref.list }, 'instance registered');
    // Every job registered now, one added while registering too (a data-defined job: listed or not, no config of ours).
    const now = soonestFirst([...this.jobs.values()], ({ definition }) => definition.config, Date.now());
    this.background = this.makeServers(now.map(({ definition, fromData }) => ({ definition, fromData, listed: listed.has(definition.name) })));
    // Changes made while registering (a job added or removed, a state) go in now.
    void this.updates.request();
    return this.current;
  }

  /** Resolves once the server nodes the last registration makes are written (or failed, logged). */
  async settled(): Promise<void> {
    await this.background;
    await this.updates.settled();
  }

  /**
   * Registers for one more job, defined by its stored config (a generic worker's SCRIPT or HTTP
   * job): its server node and its place in the job list, never its config, which belongs to whoever
   * stored it (a config written back here could bring a removed job back).
   */
  async add(definition: ResolvedJobDefinition): Promise<void> {
    this.jobs.set(definition.name, { definition, fromData: true });
    if (!this.current) return;
    await this.ensureServer(definition.name);
    await this.updates.request();
  }

  /** Stops registering for `job`: it leaves the job list (the leader gives its items to others). */
  async remove(job: string): Promise<void> {
    if (!this.jobs.delete(job) || !this.current) return;
    await this.updates.request();
  }

  /** Marks the instance `draining` (the leader stops giving it items) or `ready` again: one write. */
  async setState(state: InstanceState): Promise<void> {
    this.state = state;
    if (!this.current) return;
    await this.updates.request();
  }

  /**
   * A close begins: no registration starts from now on, and one under way (a session renewed as the
   * worker closes) stops before its next write. The entry's updates (the `draining` state) go on.
   */
  stopRegistering(): void {
    this.refusing = true;
  }

  /**
   * Resolves once no registration is under way, or after `maxMs`: one past its last check writes
   * its entry, which the close must see (its queue is the one to mark drained, its entry the one to delete).
   */
  async registrationSettled(maxMs = REGISTRATION_SETTLE_MS): Promise<void> {
    if (this.registering) await within(this.registering.catch(() => undefined), maxMs);
  }

  /** Deletes the instance entry now (a clean shutdown), so the leader reacts without waiting for expiry. */
  async unregister(): Promise<void> {
    this.stopRegistering();
    // A registration under way writes its entry after a delete made now: the leader would give items
    // to a queue nobody consumes until the session ends.
    await this.registrationSettled();
    this.stopped = true;
    clearTimeout(this.retry);
    await this.updates.stop();
    const published = this.published;
    if (!this.current || this.zk.state !== 'connected') return;
    await this.zk.delete(registryPaths.instance(this.options.instanceId)).catch(() => undefined);
    if (published) await deleteJobList(this.zk, published.jobs);
    this.current = undefined;
    this.published = undefined;
  }

  /** A close began while registering: stop before the next write. */
  private assertRegistering(): void {
    if (this.refusing) throw closedError();
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
   * Writes a new list when the jobs changed, then the entry when it says something new, then drops
   * the list it replaced. The entry is set on this incarnation's session only: after a session loss
   * the next {@link register} writes everything anew.
   */
  private async update(): Promise<void> {
    const current = this.current;
    const published = this.published;
    if (!current || !published || this.stopped || this.zk.sessionId !== current.sessionId) return;
    const { ref, parts } = buildJobList([...this.jobs.keys()], current.sessionId);
    const listChanged = ref.list !== published.jobs.list;
    if (!listChanged && this.state === published.state) return;
    if (listChanged) {
      await writeJobList(this.zk, ref, parts);
      // The session changed meanwhile: those parts are the new session's, and no entry names them.
      if (this.zk.sessionId !== current.sessionId) return void (await deleteJobList(this.zk, ref));
    }
    const entry = { ...published, state: this.state, jobs: ref };
    await this.zk.set(registryPaths.instance(this.options.instanceId), instanceEntryCodec.encode(entry));
    this.published = entry;
    if (listChanged) await deleteJobList(this.zk, published.jobs);
  }

  private retryUpdate(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.updates.request();
    }, UPDATE_RETRY_MS);
    this.retry.unref();
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
      if (hasCode(err, ErrorCodes.ZK_NO_NODE)) return;
      this.options.log.warn({ err, job }, 'could not mark the stored config fireListeners; beforeFire/afterFire run once it is');
    }
  }

  /**
   * The config of a job of the code. A job the namespace listing lacks is new: its nodes go in one
   * transaction (job, config, `servers/`, its server). A listed job's stored config wins unless the
   * definition says overwrite (ElasticJob's rule); nothing is read for it otherwise.
   */
  private async writeConfig(job: ResolvedJobDefinition, listed: boolean): Promise<void> {
    const configPath = registryPaths.jobConfig(job.name);
    if (!listed && (await this.createJobNodes(job, configPath))) return;
    // Encoded (and validated) only when written: a joining worker writes none of its 100,000 configs.
    const created = !listed && (await this.zk.createUnlessExists(configPath, jobConfigCodec.encode(job.config)));
    if (!created && job.overwrite) await this.zk.set(configPath, jobConfigCodec.encode(job.config));
    else if (!created && job.config.fireListeners) await this.announceFireListeners(job.name, configPath);
  }

  /**
   * Creates a new job's nodes (job, config, servers, server) in one multi; false when it failed: any
   * of them there already (another worker registering the same job right now) fails the whole multi,
   * and the node-by-node path sorts it out.
   */
  private async createJobNodes(job: ResolvedJobDefinition, configPath: string): Promise<boolean> {
    // fireListeners needs no announcement here: the config written is this definition's own.
    try {
      await this.zk
        .multi()
        .create(registryPaths.job(job.name), '')
        .create(configPath, jobConfigCodec.encode(job.config))
        .create(registryPaths.jobServers(job.name), '')
        .create(registryPaths.jobServer(job.name, this.options.ip), 'ENABLED')
        .commit();
      return true;
    } catch {
      return false;
    }
  }

  /**
   * After the registration, beside the first runs: each job's `servers/{ip}` (which an operator's
   * `shardcron servers disable` switches), and the config of a listed job whose node turned out to
   * hold none. Soonest-firing jobs first; failures are logged, a restart makes what is missing.
   */
  private async makeServers(jobs: ReadonlyArray<{ definition: ResolvedJobDefinition; fromData: boolean; listed: boolean }>): Promise<void> {
    const { configStored, log } = this.options;
    await forEachLimited(jobs, SERVERS_AT_ONCE, async ({ definition, fromData, listed }) => {
      if (this.stopped || !this.jobs.has(definition.name)) return;
      try {
        if (listed && !fromData && configStored && !(await configStored(definition.name))) {
          await this.zk.createUnlessExists(registryPaths.jobConfig(definition.name), jobConfigCodec.encode(definition.config));
        }
        await this.ensureServer(definition.name);
      } catch (err) {
        if (!this.stopped) log.warn({ err, job: definition.name }, 'could not write the server node of a job; it reads as ENABLED');
      }
    });
  }

  private async ensureServer(job: string): Promise<void> {
    const serverPath = registryPaths.jobServer(job, this.options.ip);
    // Asked with exists, a read ZooKeeper answers from memory, not with a create that fails: that
    // is a transaction the server logs (and, with forceSync, syncs to disk).
    if (!(await this.zk.exists(serverPath))) await this.zk.createUnlessExists(serverPath, 'ENABLED');
  }

  /**
   * Creates the ephemeral instance entry. One left by one of our previous sessions (still alive on
   * the server until it expires) is replaced; one owned by a session we do not know means another
   * live process uses the same instance id, which would break every guarantee: refuse.
   */
  private async createEntry(data: Buffer): Promise<void> {
    const path = registryPaths.instance(this.options.instanceId);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        await this.zk.create(path, data, 'ephemeral');
        return;
      } catch (err) {
        if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) {
          await this.zk.ensurePath(registryPaths.instances());
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
        `Instance id ${this.options.instanceId} is already registered by another live process ` +
          `(session ${stat.ephemeralOwner}). Give each process its own SHARDCRON_INSTANCE_ID.`,
        { instanceId: this.options.instanceId, field: 'SHARDCRON_INSTANCE_ID' },
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
