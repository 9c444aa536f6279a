/**
 * The `/{job}/servers/{ip}` nodes of servers that are gone. A worker makes its server's node for
 * every job it runs, persistent (it holds the operator's switch), and nothing removed them: each
 * rolling deploy onto new addresses (a Kubernetes pod gets a new IP) left one node per job and old
 * address, 100,000 a worker for a worker of 100,000 jobs, in ZooKeeper's memory for good.
 *
 * The leader, which follows every job's servers and every live instance anyway, removes a job's
 * node of an address no live instance has had for {@link SERVER_RETENTION_MS}, when it still says
 * `ENABLED` (what a missing node means too). A `DISABLED` node stays: it is an operator's switch,
 * and a worker that comes back on that address must find its server disabled. A worker that comes
 * back on an address whose node went makes it again, as at its first start; and a live worker's
 * node that went all the same (a worker that registered just as the leader removed its node) is
 * made again by the leader at its next sweep: it makes the missing nodes of the instances live at
 * the sweep before, and of every live instance on an address it has just removed nodes of.
 */
import { setImmediate } from 'node:timers/promises';
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, hasCode } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { DirectoryInstance, InstanceDirectory } from '../shared/registry/instance-directory';
import { registryPaths } from '../shared/registry/registry-paths';
import type { ZkClient } from '../shared/zk';
import type { JobState } from './fire-dispatcher';
import type { Clock } from './fire-timer';

/** How long no live instance has an address before its servers nodes go (default; `serverRetentionMs`). */
export const SERVER_RETENTION_MS = 10 * 60_000;
/** How often the leader looks at most (more often when the retention is shorter). */
const SWEEP_EVERY_MS = 60_000;
/** ZooKeeper requests of a sweep in flight at once. */
const IN_FLIGHT = 32;
/**
 * Nodes one sweep removes at most; the rest wait for the next sweep. A namespace that leaked many
 * addresses before this existed would otherwise have the leader list millions at once.
 */
const MAX_REMOVED_PER_SWEEP = 50_000;
/** Jobs a sweep looks at between two turns of the event loop (the fires' timers go between). */
const YIELD_EVERY = 5_000;

export interface ServerPruneDeps {
  zk: ZkClient;
  log: Logger;
  clock: Clock;
  isLeader(): boolean;
  jobs: ReadonlyMap<string, JobState>;
  /** The instances as the leader follows them (undefined while they are not loaded). */
  directory(): InstanceDirectory | undefined;
  /** {@link SERVER_RETENTION_MS} unless given. */
  retentionMs?: number;
}

/** What a sweep did. */
export interface PruneResult {
  /** `servers/{ip}` nodes removed, and the addresses they were of. */
  removed: number;
  ips: string[];
  /** Live instances' nodes made again. */
  restored: number;
}

/** Removes the servers nodes of addresses gone for the retention, while this process leads. */
export class ServerPrune {
  /** Address -> when a sweep first saw it with no live instance. */
  private readonly absentSince = new Map<string, number>();
  /** Instances live at the last sweep: only theirs are made again (a new one makes its own). */
  private liveBefore = new Set<string>();
  /** Addresses the last sweep removed nodes of: a worker may have come back on one meanwhile. */
  private prunedBefore = new Set<string>();
  private timer: ReturnType<Clock['setTimeout']> | undefined;
  /** Moves on with each begin and end: a sweep of an earlier leadership schedules no next one. */
  private turn = 0;
  private sweeping: Promise<PruneResult | undefined> | undefined;
  private readonly retentionMs: number;

  constructor(private readonly deps: ServerPruneDeps) {
    this.retentionMs = deps.retentionMs ?? SERVER_RETENTION_MS;
  }

  /** Leadership began: sweeps from now on (what is gone counts from the first sweep that sees it). */
  begin(): void {
    this.end();
    this.schedule(this.turn);
  }

  /** Leadership ended: no more sweeps, and what this one saw is forgotten. */
  end(): void {
    this.turn += 1;
    if (this.timer !== undefined) this.deps.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.absentSince.clear();
    this.liveBefore = new Set();
    this.prunedBefore = new Set();
  }

  private schedule(turn: number): void {
    const every = Math.min(SWEEP_EVERY_MS, Math.max(100, Math.floor(this.retentionMs / 2)));
    this.timer = this.deps.clock.setTimeout(() => {
      this.timer = undefined;
      void this.sweep()
        .catch((err) => this.deps.log.warn({ err }, 'could not remove the servers nodes of gone addresses; tried again later'))
        .finally(() => {
          if (turn === this.turn) this.schedule(turn);
        });
    }, every);
  }

  /** One sweep (one at a time); undefined when it did nothing (not leading, instances unknown). */
  sweep(): Promise<PruneResult | undefined> {
    return (this.sweeping ??= this.doSweep().finally(() => (this.sweeping = undefined)));
  }

  private async doSweep(): Promise<PruneResult | undefined> {
    const ips = this.liveIps();
    const directory = this.deps.directory();
    if (!ips || !directory || !this.deps.isLeader()) return undefined;
    const instances = directory.instances();
    const now = this.deps.clock.now();
    const seen = new Set<string>();
    const gone: Array<{ job: string; ip: string; version: number }> = [];
    let walked = 0;
    for (const [job, state] of this.deps.jobs) {
      if (++walked % YIELD_EVERY === 0) await setImmediate();
      for (const entry of state.view.serversCache.values()) {
        const ip = entry.name;
        if (ips.has(ip)) continue;
        seen.add(ip);
        const since = this.absentSince.get(ip);
        if (since === undefined) this.absentSince.set(ip, now);
        // Deleted at the version read only (an operator's switch written meanwhile wins).
        else if (entry.data === 'ENABLED' && entry.version !== undefined && now - since >= this.retentionMs && gone.length < MAX_REMOVED_PER_SWEEP) {
          gone.push({ job, ip, version: entry.version });
        }
      }
    }
    for (const ip of this.absentSince.keys()) if (!seen.has(ip)) this.absentSince.delete(ip);
    const missing = await this.missingOfLive(instances);
    this.liveBefore = new Set(instances.map((i) => i.instanceId));
    const removedIps = new Set<string>();
    let removed = 0;
    let restored = 0;
    await this.inFlight(gone, async ({ job, ip, version }) => {
      // An instance on that address may have come meanwhile (the directory follows the entries).
      if (this.liveIps()?.has(ip) !== false) return;
      if (!(await this.quietly(() => this.deps.zk.delete(registryPaths.jobServer(job, ip), version)))) return;
      removed += 1;
      removedIps.add(ip);
    });
    this.prunedBefore = removedIps;
    await this.inFlight(missing, async ({ job, ip }) => {
      // Not its parents: a job removed meanwhile (its subtree deleted) is not made again.
      if (await this.quietly(() => this.deps.zk.create(registryPaths.jobServer(job, ip), 'ENABLED'))) restored += 1;
    });
    const result = { removed, ips: [...removedIps].sort(), restored };
    if (removed > 0 || restored > 0) this.deps.log.info(result, 'servers nodes: those of addresses gone removed, those of live instances made again');
    return result;
  }

  /** Every live entry's address; undefined while an entry cannot be read (its address is unknown). */
  private liveIps(): Set<string> | undefined {
    const known = this.deps.directory()?.knownAddresses();
    return known && known.unreadable.size === 0 ? known.ips : undefined;
  }

  /**
   * Jobs of instances live since the last sweep, or on an address it removed nodes of, whose server
   * node is not there (a job the leader follows). Instances on one address with the same list are looked at once.
   */
  private async missingOfLive(instances: readonly DirectoryInstance[]): Promise<Array<{ job: string; ip: string }>> {
    const out: Array<{ job: string; ip: string }> = [];
    const looked = new Map<string, Set<ReadonlySet<string>>>();
    const done = new Set<string>();
    for (const { instanceId, live, jobs } of instances) {
      const { ip } = live.info;
      if (!this.liveBefore.has(instanceId) && !this.prunedBefore.has(ip)) continue;
      const lists = looked.get(ip) ?? new Set();
      if (lists.has(jobs)) continue;
      looked.set(ip, lists.add(jobs));
      let walked = 0;
      for (const job of jobs) {
        if (++walked % YIELD_EVERY === 0) await setImmediate();
        const view = this.deps.jobs.get(job)?.view;
        if (!view || !view.config || view.serversCache.has(ip)) continue;
        const key = `${job}\u0000${ip}`;
        if (done.has(key)) continue;
        done.add(key);
        out.push({ job, ip });
      }
    }
    return out;
  }

  /**
   * Runs `op` over `items`, {@link IN_FLIGHT} at a time, while this process leads; the first error
   * other than a node changed or gone meanwhile ends it (ZooKeeper unreachable: the next sweep).
   */
  private async inFlight<T>(items: readonly T[], op: (item: T) => Promise<void>): Promise<void> {
    let failed = false;
    await forEachLimited(items, IN_FLIGHT, async (item) => {
      if (failed || !this.deps.isLeader()) return;
      await op(item).catch((err: unknown) => {
        failed = true;
        throw err;
      });
    });
  }

  /** True when `op` did what it was for; false when the node changed or went meanwhile (left as it is). */
  private async quietly(op: () => Promise<unknown>): Promise<boolean> {
    try {
      return (await op()) !== false;
    } catch (err) {
      if ([ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_NOT_EMPTY, ErrorCodes.ZK_NODE_EXISTS].some((code) => hasCode(err, code))) return false;
      throw err;
    }
  }
}
