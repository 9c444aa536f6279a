/**
 * The item lock as the item runner sees it: a narrow interface (as BullMQ keeps its job lock behind
 * LockManagerWorkerContext), so the runner and the executors never touch the lock's storage. With
 * monitorExecution the lock is the ephemeral `sharding/{i}/running` node, kept across fires as a
 * lease with each run recorded in Redis ({@link LeaseItemLock}, SHARDCRON_ITEM_LEASE) or created and
 * deleted per run ({@link ZkItemLock}, the default); without it, a set of this process ({@link LocalItemLock});
 * {@link ItemLocks} picks one per request.
 */
import type { JobConfig } from '../shared/config/job-config';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import type { ZkSessionOps } from '../shared/zk';

/** A misfire mark as read: the fire it asks for, and the node version to delete it with (-1: local). */
export interface MisfireMark {
  fireTime: number;
  version: number;
}

/** An item lock as held: with monitorExecution, the session owning `running`; the item's completed fires (read under the lock, or as this process remembers them without monitorExecution). */
export interface Hold {
  session?: ZkSessionOps;
  done?: readonly number[];
  /**
   * The item node's `cversion` after this process's last release of the item, when that release
   * knew the item had no misfire mark (see ZkItemLock's release); only for a lock whose cached view
   * of the item was proven fresh.
   */
  markFree?: number;
}

/**
 * An item found taken: by a run of this process (`local`) or of another one, and whether that run
 * is catch-up work (see `ExecutionRequest.catchUp`), which a request waits for.
 */
export interface Busy {
  busy: true;
  local: boolean;
  catchUp: boolean;
  /**
   * Another instance holds the item's lease but runs nothing (item leases): it was asked for the
   * item, and the request waits for it to let go instead of counting as a misfire.
   */
  handoff?: boolean;
  /**
   * The lock could not settle who holds the item (it changed hands on every attempt) and left no
   * misfire mark: the request waits and tries again, as for a handoff, rather than count as a misfire.
   */
  unsettled?: boolean;
}

/** What an attempt to lock an item got. */
export type Acquired = Hold | Busy;

export const isBusy = (acquired: Acquired): acquired is Busy => (acquired as Busy).busy === true;

/** How {@link ItemLock.acquire} treats an item found running. */
export interface AcquireOptions {
  /** Leave a misfire mark (misfire on) when the holder is a regular run. */
  markOnBusy: boolean;
  /** Return at once, without a mark, when the holder is a catch-up run: the request waits for it. */
  waitBehindCatchUp: boolean;
  /** This run is catch-up work (said in the lock's data). */
  catchUp: boolean;
}

/** What a release records. */
export interface ReleaseOptions {
  /** The run completed: its fire is recorded with the release. */
  completed: boolean;
  /** The misfire mark the round stood for, consumed with the release (with its completion, or because its fire was already done). */
  mark?: MisfireMark;
  /** Read the item's misfire mark right behind the release. */
  readMark: boolean;
}

/**
 * What a release did: whether the multi with the completion (or the consumed mark) committed, and
 * the misfire mark read right after it: null when there was none, undefined when not read.
 */
export interface Released {
  recorded: boolean;
  mark: MisfireMark | null | undefined;
  /** The release's answer was lost and its session ended before we could look: it may have gone through. */
  unknown?: boolean;
}

/**
 * A lock's answer: a promise when it asks ZooKeeper or Redis, the value itself when this process's
 * own maps answer (the lock without monitorExecution). That one answered through an async function
 * made a promise, a frame and a microtask per call, three calls per request, on the hot path of
 * jobs that fire every second: the item runner awaits only an answer that is a promise, a native
 * one (it looks with `instanceof Promise`; a lock's async methods make those). Where a release
 * wakes a request waiting for the item, the runner still awaits it, so that the woken request takes
 * the item before the releasing request's next round can.
 */
export type LockAnswer<T> = T | Promise<T>;

/** The lock of items, keyed by `{job}|{item}` ({@link itemKey}). */
export interface ItemLock {
  /** Takes the item for `request`, or says who has it. */
  acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): LockAnswer<Acquired>;
  /** Lets go of a hold, recording what `options` says. Never throws for a lost session: `recorded` is false then. */
  release(request: ExecutionRequest, hold: Hold, options: ReleaseOptions): LockAnswer<Released>;
  /** The mark left for the item, if any, without consuming it (it goes with the re-run's completion). */
  peekMisfire(config: JobConfig, request: ExecutionRequest): LockAnswer<MisfireMark | undefined>;
  /** Whether a run (or a lock attempt) of this process holds the item. */
  holdsLocally(key: string): boolean;
  /** Whether this process knows fire `fireTime` of the item completed. */
  knownCompleted(key: string, fireTime: number): boolean;
  /** Forgets what it remembers of a removed job's items. */
  forgetJob(job: string): void;
}

/** What this process keys an item by in its maps. */
export const itemKey = (request: Pick<ExecutionRequest, 'job' | 'item'>): string => `${request.job}|${request.item}`;

/** The job of an {@link itemKey}. */
export const jobOfItemKey = (key: string): string => key.slice(0, key.lastIndexOf('|'));

/**
 * The lock each request's config asks for: ZooKeeper's with monitorExecution, this process's
 * without. A hold is released by the lock that made it (a hold with a session is ZooKeeper's),
 * whatever the config says by then.
 */
export class ItemLocks implements ItemLock {
  constructor(
    private readonly monitored: ItemLock,
    private readonly local: ItemLock,
  ) {}

  acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): LockAnswer<Acquired> {
    return (config.monitorExecution ? this.monitored : this.local).acquire(config, request, options);
  }

  release(request: ExecutionRequest, hold: Hold, options: ReleaseOptions): LockAnswer<Released> {
    return (hold.session ? this.monitored : this.local).release(request, hold, options);
  }

  peekMisfire(config: JobConfig, request: ExecutionRequest): LockAnswer<MisfireMark | undefined> {
    return (config.monitorExecution ? this.monitored : this.local).peekMisfire(config, request);
  }

  holdsLocally(key: string): boolean {
    return this.monitored.holdsLocally(key) || this.local.holdsLocally(key);
  }

  knownCompleted(key: string, fireTime: number): boolean {
    return this.monitored.knownCompleted(key, fireTime) || this.local.knownCompleted(key, fireTime);
  }

  forgetJob(job: string): void {
    this.monitored.forgetJob(job);
    this.local.forgetJob(job);
  }
}
