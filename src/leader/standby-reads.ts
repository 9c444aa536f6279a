/**
 * What a takeover reads of each job (its dispatch ledger and whether it has failover intents), read
 * ahead by a warm standby so that the takeover reads only what changed since (docs/design-notes.md,
 * "Warm standby").
 *
 * Each value is read once with a one-shot watch. A change only marks it stale: a job that fires
 * every second then costs the standby one notification, not a read per fire, and the takeover reads
 * its ledger again. A stale value of a job that fires less often than every five minutes is read
 * again (with a new watch) a few seconds later, so that after an hour the hourly jobs are not all
 * stale. The takeover relies on ZooKeeper's ordering: a client gets the notification of a change
 * before it learns of anything that happened later, and the old leader's last write comes before
 * the deletion of its candidate node that elects this one (its writes are fenced on that node), so
 * a value still fresh when the election is seen is the value the old leader left.
 */
import { forEachLimited } from '../shared/concurrency';
import { ErrorCodes, hasCode } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { parseRegistryPath, registryPaths } from '../shared/registry/registry-paths';
import type { ZkClient, ZkWatchEvent } from '../shared/zk';

/** A stale value of a job that fires less often than this is read again ahead of a takeover. */
export const REFRESH_RARER_THAN_MS = 5 * 60_000;
/** How long after its change such a value is read again (several changes in a row cost one read). */
export const REFRESH_DELAY_MS = 10_000;
/** Values read at once ahead of a takeover. */
const READS_AT_ONCE = 64;

/** What the standby knows of one job that a takeover can use. */
export interface StandbyFacts {
  /** The ledger's text, `null` if there is none; undefined when not known to be current. */
  ledger: string | null | undefined;
  /** True when the job is known to have no failover intents. */
  noIntents: boolean;
  /**
   * How many item nodes (`sharding/{i}`) the job had when its ledger was read and found absent:
   * item nodes stay until the job is removed, so a takeover need not lay out a job that never
   * fired when it has that many already. 0 when not read.
   */
  laidOut: number;
}

/** A warm standby's current copies of each job's ledger and failover intent list. */
export class StandbyReads {
  /** Current ledgers: text, or null for none. A job missing here is unread or stale. */
  private readonly ledgers = new Map<string, string | null>();
  /** Item nodes of jobs that had no ledger when read (see StandbyFacts.laidOut). */
  private readonly items = new Map<string, number>();
  /** Jobs currently known to have no failover intents. */
  private readonly withoutIntents = new Set<string>();
  /** Jobs read since the last {@link clear} and not forgotten: notifications of others are ignored. */
  private readonly tracked = new Set<string>();
  /** Jobs whose stale values are read again at the next refresh. */
  private readonly stale = new Set<string>();
  /**
   * Reads in progress (`job|ledger`, `job|intents`) and whether a change was notified meanwhile: the
   * answer and the notification of a later change can arrive together, the notification handled
   * before the code awaiting the answer runs, and that answer must not be taken for current.
   */
  private readonly reading = new Map<string, boolean>();
  private refreshTimer: NodeJS.Timeout | undefined;
  /** Bumped by {@link clear}: reads and notifications of before are ignored. */
  private generation = 0;
  // One watcher each for every job (the client keeps a raw watcher per function).
  private readonly onLedgerEvent = (event: ZkWatchEvent): void => this.changed(event, 'ledger');
  private readonly onIntentsEvent = (event: ZkWatchEvent): void => this.changed(event, 'intents');

  constructor(
    private readonly zk: ZkClient,
    private readonly log: Logger,
    /** Whether `job` fires at least every {@link REFRESH_RARER_THAN_MS} (its stale values then wait for the takeover). */
    private readonly firesOften: (job: string) => boolean,
    private readonly refreshDelayMs = REFRESH_DELAY_MS,
  ) {}

  /** Reads `job`'s values, each with a watch. */
  async read(job: string): Promise<void> {
    const generation = this.generation;
    this.tracked.add(job);
    await Promise.all([this.readLedger(job, generation), this.readIntents(job, generation)]);
  }

  /** What is known of `job` now. */
  facts(job: string): StandbyFacts {
    return { ledger: this.ledgers.get(job), noIntents: this.withoutIntents.has(job), laidOut: this.items.get(job) ?? 0 };
  }

  /** How many jobs have a current ledger (for the log). */
  get currentLedgers(): number {
    return this.ledgers.size;
  }

  forget(job: string): void {
    this.tracked.delete(job);
    this.ledgers.delete(job);
    this.items.delete(job);
    this.withoutIntents.delete(job);
    this.stale.delete(job);
  }

  /** Forgets everything; watches still armed fire into nothing. */
  clear(): void {
    this.generation += 1;
    this.tracked.clear();
    this.ledgers.clear();
    this.items.clear();
    this.withoutIntents.clear();
    this.stale.clear();
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  private readLedger(job: string, generation: number): Promise<void> {
    return this.readWatched(job, 'ledger', generation, async () => {
      const path = registryPaths.leaderFire(job);
      for (;;) {
        try {
          return (await this.zk.get(path, this.onLedgerEvent)).data.toString('utf8');
        } catch (err) {
          if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
        }
        // No ledger: a watch on its creation. A ledger created meanwhile is read again.
        if (!(await this.zk.exists(path, this.onLedgerEvent))) break;
      }
      // A job that never fired: whether its item nodes are laid out (a takeover lays out the rest;
      // at 100,000 jobs its listing of 79,000 jobs' items held up the first dispatch).
      const sharding = await this.zk.exists(registryPaths.jobSharding(job));
      if (generation === this.generation && this.tracked.has(job) && sharding) this.items.set(job, Math.max(sharding.numChildren, this.items.get(job) ?? 0));
      return null;
    }, (text) => this.ledgers.set(job, text));
  }

  private readIntents(job: string, generation: number): Promise<void> {
    return this.readWatched(job, 'intents', generation, async () => {
      const path = registryPaths.leaderFailoverItems(job);
      for (;;) {
        try {
          return (await this.zk.children(path, this.onIntentsEvent)).length === 0;
        } catch (err) {
          if (!hasCode(err, ErrorCodes.ZK_NO_NODE)) throw err;
        }
        if (!(await this.zk.exists(path, this.onIntentsEvent))) return true;
      }
    }, (none) => none && this.withoutIntents.add(job));
  }

  /** Runs `read` and keeps its answer unless a change of the value was notified meanwhile. */
  private async readWatched<T>(job: string, what: 'ledger' | 'intents', generation: number, read: () => Promise<T>, keep: (value: T) => void): Promise<void> {
    const key = `${job}|${what}`;
    this.reading.set(key, false);
    try {
      const value = await read();
      if (generation === this.generation && this.tracked.has(job) && this.reading.get(key) === false) keep(value);
    } finally {
      this.reading.delete(key);
    }
  }

  /** A watched value changed: it is stale (synchronously, before any later notification is handled). */
  private changed(event: ZkWatchEvent, what: 'ledger' | 'intents'): void {
    const parsed = parseRegistryPath(event.path);
    if (parsed.kind !== (what === 'ledger' ? 'leaderFire' : 'leaderFailoverItems')) return;
    const { job } = parsed;
    if (!this.tracked.has(job)) return;
    if (what === 'ledger') this.ledgers.delete(job);
    else this.withoutIntents.delete(job);
    const key = `${job}|${what}`;
    if (this.reading.has(key)) this.reading.set(key, true);
    if (this.firesOften(job)) return;
    this.stale.add(job);
    this.refreshTimer ??= setTimeout(() => void this.refresh(this.generation), this.refreshDelayMs);
  }

  private async refresh(generation: number): Promise<void> {
    this.refreshTimer = undefined;
    const jobs = [...this.stale];
    this.stale.clear();
    await forEachLimited(jobs, READS_AT_ONCE, async (job) => {
      if (generation !== this.generation || !this.tracked.has(job)) return;
      const facts = this.facts(job);
      try {
        await Promise.all([facts.ledger === undefined && this.readLedger(job, generation), !facts.noIntents && this.readIntents(job, generation)]);
      } catch (err) {
        // It stays stale: the takeover reads it.
        this.log.debug({ err, job }, 'could not read a job ahead of a takeover');
      }
    });
  }
}
