import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import { assertJobName, isValidJobName, registryPaths } from '../shared/registry/registry-paths';
import { InstanceDirectory } from '../shared/registry/instance-directory';
import { ChildrenCache, sleep, stampReaches, type NodeStamp, type ZkClient } from '../shared/zk';
import { within } from '../shared/concurrency';
import { jobNotFound } from './admin-errors';
import { DataProblems, type DataProblem } from './data-problems';
import { summarizeInstances, type InstanceSummary } from './instance-summary';
import type { ItemRun } from '../shared/registry/item-records';
import { describeJob, summarizeJob, type ItemSnapshot, type JobDetail, type JobSummary } from './job-status';
import { JobWatch } from './job-watch';

/** Default of {@link ReadModelOptions.itemIdleMs}: item watches outlive the last look at a job by this much. */
export const ITEM_IDLE_MS = 5 * 60_000;

/** How long a write waits at most for the model to show it (a watch notification and a read, normally a few ms). */
export const CATCH_UP_MS = 2_000;
/** How often that wait looks. */
const CATCH_UP_POLL_MS = 5;

/** Options of {@link ReadModel}. */
export interface ReadModelOptions {
  zk: ZkClient;
  logger?: Logger;
  /**
   * Watch only these jobs; any other name answers JOB_NOT_FOUND. For a one-shot reader (the CLI's
   * `jobs show NAME`) that should not load a whole namespace. Default: every job.
   */
  jobs?: readonly string[];
  /** Item watches of a job whose detail nobody read for this long are dropped; 0 keeps them. Default {@link ITEM_IDLE_MS}. */
  itemIdleMs?: number;
  /** Epoch ms now, for next fire times; default Date.now. */
  clock?: () => number;
  /**
   * The item records in Redis of some items of a job (item leases): a `running` node whose holder's
   * record shows no run in progress is a lease held between runs, and the item is not running.
   * Unset: a `running` node is a run.
   */
  itemRuns?: (job: string, items: readonly number[]) => Promise<Map<number, ItemRun>>;
}

/**
 * What the console and the CLI read: jobs, their status and items, live instances, every answer
 * computed from watch-backed caches, so a reader polling every second costs ZooKeeper nothing per
 * poll once the model has started. Changes arrive by watch notification, within one round trip.
 *
 * Costs, with J jobs, I live instances per job, S servers per job and N items of the jobs whose
 * detail was read within {@link ReadModelOptions.itemIdleMs}:
 * - start: one children read of the namespace root, then per job 5 nodes (config, `instances`,
 *   `servers`, `leader/sharding/necessary`, `leader/fire`): about 3 + I + S reads per job, at most
 *   128 in flight per client (the caches' shared limit).
 * - watches held: 1 on the root + per job 5 + I + S; plus per watched item 1 children watch on
 *   `sharding/{i}` and 1 data watch per node under it (`instance`, and `running`, `failover`,
 *   `disabled`, `misfire` while they exist).
 * - while jobs run: one notification and one read per fire per job (the ledger `leader/fire`);
 *   per execution of a watched item with monitorExecution, two notifications and one or two reads
 *   (`running` appears and goes). Instances and servers cost only when they change.
 * - a job's first {@link getJob}: one read per item and per node under it; then nothing per call.
 */
export class ReadModel {
  private readonly zk: ZkClient;
  private readonly log: Logger;
  private readonly only: ReadonlySet<string> | undefined;
  private readonly itemIdleMs: number;
  private readonly clock: () => number;
  private readonly itemRuns: ReadModelOptions['itemRuns'];
  private readonly dataProblems = new DataProblems();
  private readonly watches = new Map<string, JobWatch>();
  private readonly root: ChildrenCache;
  /** Live instances and their jobs, for every job's watch. */
  private readonly directory: InstanceDirectory;
  private starting: Promise<this> | undefined;
  private closing: Promise<void> | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(options: ReadModelOptions) {
    this.zk = options.zk;
    this.log = (options.logger ?? silentLogger).child({ component: 'admin-read-model' });
    this.only = options.jobs ? new Set(options.jobs) : undefined;
    this.itemIdleMs = options.itemIdleMs ?? ITEM_IDLE_MS;
    this.clock = options.clock ?? Date.now;
    this.itemRuns = options.itemRuns;
    this.root = new ChildrenCache(this.zk, {
      path: '/',
      logger: this.log,
      listeners: { added: ({ name }) => this.addJob(name), removed: ({ name }) => void this.dropJob(name) },
    });
    this.directory = new InstanceDirectory(this.zk, {
      log: this.log,
      listener: {
        invalid: (path, error) => this.dataProblems.report(path, error),
        valid: (path) => this.dataProblems.clear(path),
      },
    });
  }

  /** Loads every job's nodes and starts watching; idempotent. Reads start it on first use. */
  start(): Promise<this> {
    return (this.starting ??= this.doStart());
  }

  /** Every job with a valid config, sorted by name (`GET /api/jobs`). */
  async listJobs(): Promise<JobSummary[]> {
    await this.start();
    const now = this.clock();
    const out: JobSummary[] = [];
    for (const watch of this.sortedWatches()) {
      const snapshot = watch.snapshot();
      if (snapshot) out.push(summarizeJob(snapshot, now));
    }
    return out;
  }

  /**
   * One job with its items (`GET /api/jobs/:name`). Throws INVALID_CONFIG for a name that cannot be a
   * job, JOB_NOT_FOUND for an unknown job (or one without a config), CORRUPT_DATA naming the config's
   * path when the job has only ever had an unreadable config.
   */
  async getJob(name: string): Promise<JobDetail> {
    assertJobName(name, 'job');
    await this.start();
    const watch = this.watches.get(name);
    if (!watch) throw jobNotFound(name);
    await watch.start();
    const snapshot = watch.snapshot();
    if (!snapshot) {
      if (watch.configState === 'absent') throw jobNotFound(name, 'it has no config node');
      const path = registryPaths.jobConfig(name);
      const problem = this.dataProblems.get(path);
      throw new ShardcronError(ErrorCodes.CORRUPT_DATA, problem?.message ?? `Job ${JSON.stringify(name)}: the config at ${path} cannot be read`, { job: name, path });
    }
    const now = this.clock();
    return describeJob(snapshot, await this.runningNow(name, await watch.items(now)), now);
  }

  /**
   * Waits until the model holds `job`'s config as written by `stamp` or later, so that a read after
   * a write of it (the console's answer to a disable, the next GET) shows the write rather than what
   * the watch had before its notification came. A job the root listing has not brought yet is
   * waited for too (a job just created). Returns at once while the model has not started (its first
   * read loads what is stored), and after {@link CATCH_UP_MS} at most, start-up included: then the
   * model shows what it has (a job removed meanwhile, or ZooKeeper unreachable).
   */
  async configCaughtUp(job: string, stamp: NodeStamp): Promise<void> {
    await this.caughtUp(job, (watch) => stampReaches(watch.configStamp, stamp));
  }

  /**
   * Waits, as {@link configCaughtUp}, until the model holds the config `stamp` (the total the item
   * was checked against) and shows item `item` of `job` disabled or not. Another operator's switch
   * of the same item meanwhile makes it wait out the bound.
   */
  async itemCaughtUp(job: string, item: number, disabled: boolean, stamp: NodeStamp): Promise<void> {
    await this.caughtUp(job, async (watch) => stampReaches(watch.configStamp, stamp) && (await watch.itemShows(item, disabled)));
  }

  private async caughtUp(job: string, shows: (watch: JobWatch) => boolean | Promise<boolean>): Promise<void> {
    if (!this.starting) return;
    // A monotonic deadline: a wall clock stepped back would stretch the wait.
    const deadline = performance.now() + CATCH_UP_MS;
    const left = () => deadline - performance.now();
    await within(this.starting.catch(() => undefined), CATCH_UP_MS);
    const watched = isValidJobName(job) && (!this.only || this.only.has(job));
    while (watched && !this.closing && left() > 0) {
      const watch = this.watches.get(job);
      if (watch && (await within(Promise.resolve(shows(watch)), left()))) return;
      await sleep(Math.min(CATCH_UP_POLL_MS, Math.max(0, left())));
    }
  }

  /** The items with `running` told apart from leases held between runs (see ReadModelOptions.itemRuns). */
  private async runningNow(job: string, items: ItemSnapshot[]): Promise<ItemSnapshot[]> {
    const held = items.filter((i) => i.running).map((i) => i.item);
    if (!this.itemRuns || held.length === 0) return items;
    let records: Map<number, ItemRun>;
    try {
      records = await this.itemRuns(job, held);
    } catch (err) {
      this.log.warn({ err, job }, 'could not read the item records; a held lease shows as running');
      return items;
    }
    return items.map((snapshot) => {
      const record = records.get(snapshot.item);
      const idle = snapshot.running && record?.holder === snapshot.runningHolder && record?.running === undefined;
      return idle ? { ...snapshot, running: false, runningHolder: undefined } : snapshot;
    });
  }

  /** Every live instance, with the jobs it is registered for (`GET /api/instances`). */
  async listInstances(): Promise<InstanceSummary[]> {
    await this.start();
    return summarizeInstances(
      this.directory.instances().map(({ live, jobs }) => ({ ...live, jobs })),
      (job) => this.watches.has(job),
    );
  }

  /** The queues of every live instance, sorted by instance id. */
  async liveQueues(): Promise<string[]> {
    await this.start();
    return this.directory.instances().map(({ live }) => live.info.queue);
  }

  /** Nodes whose data could not be read, each with its path and what is wrong. */
  problems(): DataProblem[] {
    return this.dataProblems.list();
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private async doStart(): Promise<this> {
    if (this.closing) throw new ShardcronError(ErrorCodes.CLOSED, 'The read model is closed');
    await Promise.all([this.root.start(), this.directory.start()]);
    // Jobs the root listed are being loaded (addJob); wait for all of them.
    await Promise.all([...this.watches.values()].map((watch) => watch.start()));
    if (this.itemIdleMs > 0) {
      this.sweeper = setInterval(() => this.releaseIdleItems(), Math.min(this.itemIdleMs, 60_000));
      this.sweeper.unref();
    }
    return this;
  }

  private sortedWatches(): JobWatch[] {
    return [...this.watches.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  private addJob(name: string): void {
    // `.cluster` and anything else that cannot be a job are not jobs.
    if (this.closing || !isValidJobName(name) || this.watches.has(name) || (this.only && !this.only.has(name))) return;
    const watch = new JobWatch(this.zk, name, this.dataProblems, this.log, this.directory);
    this.watches.set(name, watch);
    watch.start().catch((err: unknown) => this.log.warn({ err, job: name }, 'could not load job'));
  }

  private async dropJob(name: string): Promise<void> {
    const watch = this.watches.get(name);
    this.watches.delete(name);
    await watch?.close();
  }

  private releaseIdleItems(): void {
    const before = this.clock() - this.itemIdleMs;
    for (const watch of this.watches.values()) if (watch.watchingItems && watch.itemsReadAt < before) watch.releaseItems();
  }

  private async doClose(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    await Promise.allSettled([this.root.close(), this.directory.close()]);
    const watches = [...this.watches.values()];
    this.watches.clear();
    await Promise.allSettled(watches.map((watch) => watch.close()));
  }
}
