/**
 * The item lock without monitorExecution: a map of this process, so an item never runs twice at
 * once here. Nothing is written to ZooKeeper; across instances the guarantees are per process only
 * (README's delivery guarantees). Misfire marks are kept here as well.
 */
import type { JobConfig } from '../shared/config/job-config';
import type { ExecutionRequest } from '../shared/registry/execution-request';
import { itemKey, type AcquireOptions, type Acquired, type Hold, type ItemLock, type MisfireMark, type Released } from './item-lock';

/** {@link ItemLock} within this process. */
export class LocalItemLock implements ItemLock {
  /** Items (`{job}|{item}`) a run of this process holds: whether it catches up. */
  private readonly running = new Map<string, boolean>();
  /** item key -> latest fire time that found it running. */
  private readonly misfires = new Map<string, number>();

  /** `onReleased`: a hold of this process on the item ended. */
  constructor(private readonly onReleased: (key: string) => void) {}

  async acquire(config: JobConfig, request: ExecutionRequest, options: AcquireOptions): Promise<Acquired> {
    const key = itemKey(request);
    const holder = this.running.get(key);
    if (holder === undefined) {
      this.running.set(key, options.catchUp);
      return {};
    }
    if (holder && options.waitBehindCatchUp) return { busy: true, local: true, catchUp: true };
    if (config.misfire && options.markOnBusy) this.misfires.set(key, Math.max(this.misfires.get(key) ?? 0, request.fireTime));
    return { busy: true, local: true, catchUp: holder };
  }

  async release(request: ExecutionRequest, _hold: Hold): Promise<Released> {
    const key = itemKey(request);
    this.running.delete(key);
    this.onReleased(key);
    return { recorded: true, mark: undefined };
  }

  /** The mark, consumed at once: a process that dies takes its marks with it anyway. */
  async peekMisfire(_config: JobConfig, request: ExecutionRequest): Promise<MisfireMark | undefined> {
    const key = itemKey(request);
    const fireTime = this.misfires.get(key);
    this.misfires.delete(key);
    return fireTime === undefined ? undefined : { fireTime, version: -1 };
  }

  holdsLocally(key: string): boolean {
    return this.running.has(key);
  }

  knownCompleted(): boolean {
    return false;
  }

  forgetJob(): void {
    // Nothing outlives a run here.
  }
}
