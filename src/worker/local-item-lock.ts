/**
 * The item lock without monitorExecution: a map of this process, so an item never runs twice at
 * once here. Nothing is written to ZooKeeper; across instances the guarantees are per process only
 * (README's delivery guarantees). Misfire marks are kept here as well, and each item's last completed
 * fires: a request added again after it ran here (a new leader's replay, a resumed failover, a
 * reconcile after a Redis failover; BullMQ no longer keeps completed jobs to ignore the add) comes
 * back to this process, which skips it.
 */
import type { JobConfig } from '../shared/config/job-config';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { addCompletedFire } from '../shared/registry/completed-fires';
import { itemKey, jobOfItemKey, type AcquireOptions, type Acquired, type Hold, type ItemLock, type MisfireMark, type Released, type ReleaseOptions } from './item-lock';

/** A hold of an item no run here completed yet, and every release's answer: the same objects each time (never changed). */
const FIRST_HOLD: Hold = Object.freeze({});
const RELEASED: Released = Object.freeze({ recorded: true, mark: undefined });

/** {@link ItemLock} within this process: it answers at once, never with a promise. */
export class LocalItemLock implements ItemLock {
  /** Items (`{job}|{item}`) a run of this process holds: whether it catches up. */
  private readonly running = new Map<string, boolean>();
  /** item key -> latest fire time that found it running. */
  private readonly misfires = new Map<string, number>();
  /**
   * item key -> the hold of its next run here: the last {@link COMPLETED_FIRES_KEPT} fire times
   * completed here, the newest last (as ZooKeeper's item node keeps them with monitorExecution): 32
   * numbers per item this process ran, whatever the throughput, in one object per item rather than
   * a new hold per run.
   */
  private readonly completed = new Map<string, { readonly done: number[] }>();

  /** `onReleased`: a hold of this process on the item ended. */
  constructor(private readonly onReleased: (key: string) => void) {}

  acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): Acquired {
    const key = itemKey(request);
    const holder = this.running.get(key);
    if (holder === undefined) {
      this.running.set(key, options.catchUp);
      return this.completed.get(key) ?? FIRST_HOLD;
    }
    if (holder && options.waitBehindCatchUp) return { busy: true, local: true, catchUp: true };
    if (config.misfire && options.markOnBusy) this.misfires.set(key, Math.max(this.misfires.get(key) ?? 0, request.fireTime));
    return { busy: true, local: true, catchUp: holder };
  }

  release(request: ExecutionRequest, _hold: Hold, options?: ReleaseOptions): Released {
    const key = itemKey(request);
    if (options?.completed) this.addCompleted(key, request.fireTime);
    // The mark the round stood for goes with it, unless a newer fire replaced it meanwhile (as a
    // changed version keeps ZooKeeper's).
    if (options?.mark && this.misfires.get(key) === options.mark.fireTime) this.misfires.delete(key);
    this.running.delete(key);
    this.onReleased(key);
    return RELEASED;
  }

  /**
   * The mark, left in place: the release of the round that runs it consumes it. Consumed here, it
   * was lost when that round then found the item taken (a trigger woken by the release before it)
   * and, being owed work itself, left no mark for the next holder.
   */
  peekMisfire(_config: JobConfig, request: ExecutionRequest): MisfireMark | undefined {
    const fireTime = this.misfires.get(itemKey(request));
    return fireTime === undefined ? undefined : { fireTime, version: -1 };
  }

  holdsLocally(key: string): boolean {
    return this.running.has(key);
  }

  knownCompleted(key: string, fireTime: number): boolean {
    return this.completed.get(key)?.done.includes(fireTime) === true;
  }

  /**
   * Adds the fire to the item's list in place (a new list per run was kept until the item's next
   * fire and filled the old generation). `knownCompleted` sees the list before or after the change;
   * a hold's `done`, the same array, is read by its run before that run's release, while no other
   * run of this process holds the item.
   */
  private addCompleted(key: string, fireTime: number): void {
    let hold = this.completed.get(key);
    if (!hold) this.completed.set(key, (hold = { done: [] }));
    addCompletedFire(hold.done, fireTime);
  }

  forgetJob(job: string): void {
    for (const key of this.completed.keys()) if (jobOfItemKey(key) === job) this.completed.delete(key);
    // A mark stays until a completed re-run takes it: one of a job removed (or added again) is void.
    for (const key of this.misfires.keys()) if (jobOfItemKey(key) === job) this.misfires.delete(key);
  }
}
