import { COMPLETED_FIRES_KEPT } from '../../src/shared/registry/completed-fires';
import { itemKey } from '../../src/worker/item-lock';
import { LocalItemLock } from '../../src/worker/local-item-lock';
import type { JobConfig } from '../../src/shared/config/job-config';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';

const BASE = Date.UTC(2026, 10, 28, 21, 0, 0);
const config = { misfire: true } as JobConfig;
const request = (fireTime: number): ExecutionRequest => ({ job: 'billing', item: 0, fireTime, source: 'NORMAL', epoch: 1 });
const options = { markOnBusy: true, waitBehindCatchUp: false, catchUp: false };
const key = itemKey(request(0));

/** Runs the fire to its completed release; returns what the hold saw as done when it was taken. */
async function complete(lock: LocalItemLock, fireTime: number): Promise<readonly number[] | undefined> {
  const hold = await lock.acquire(config, request(fireTime), options);
  if ('busy' in hold) throw new Error('busy');
  const seen = hold.done ? [...hold.done] : undefined;
  await lock.release(request(fireTime), hold, { completed: true, readMark: false });
  return seen;
}

describe('LocalItemLock', () => {
  it('keeps the newest completed fires of an item, newest last, each once', async () => {
    const lock = new LocalItemLock(() => undefined);
    expect(await complete(lock, BASE)).toBeUndefined();
    for (let i = 1; i < 40; i += 1) await complete(lock, BASE + i * 1_000);
    // A fire completed again (a replay that ran) moves to the end.
    const replayed = BASE + 30_000;
    const seen = await complete(lock, replayed);
    const newest = Array.from({ length: COMPLETED_FIRES_KEPT }, (_, i) => BASE + (8 + i) * 1_000);
    expect(seen).toEqual(newest);
    expect(lock.knownCompleted(key, replayed)).toBe(true);
    expect(lock.knownCompleted(key, BASE + 7_000)).toBe(false);
    const after = await complete(lock, BASE + 40_000);
    expect(after).toEqual([...newest.filter((f) => f !== replayed), replayed]);
    expect(after).toHaveLength(COMPLETED_FIRES_KEPT);
  });

  it('does not count a release that did not complete', async () => {
    const lock = new LocalItemLock(() => undefined);
    await complete(lock, BASE);
    const hold = await lock.acquire(config, request(BASE + 1_000), options);
    if ('busy' in hold) throw new Error('busy');
    await lock.release(request(BASE + 1_000), hold, { completed: false, readMark: false });
    expect(lock.knownCompleted(key, BASE)).toBe(true);
    expect(lock.knownCompleted(key, BASE + 1_000)).toBe(false);
  });

  it('keeps a misfire mark until the release of the round that ran it, and keeps a newer one', async () => {
    const lock = new LocalItemLock(() => undefined);
    const hold = await lock.acquire(config, request(BASE), options);
    if ('busy' in hold) throw new Error('busy');
    expect(lock.acquire(config, request(BASE + 1_000), options)).toMatchObject({ busy: true });
    // Read, not consumed: the round that runs it may find the item taken and leave it for the next holder.
    expect(lock.peekMisfire(config, request(BASE))).toEqual({ fireTime: BASE + 1_000, version: -1 });
    expect(lock.peekMisfire(config, request(BASE))).toEqual({ fireTime: BASE + 1_000, version: -1 });
    await lock.release(request(BASE), hold, { completed: true, readMark: true });
    const rerun = lock.acquire(config, request(BASE + 1_000), options);
    if ('busy' in rerun) throw new Error('busy');
    // A newer fire finds the re-run running: its mark replaces the one the re-run stands for, and stays.
    expect(lock.acquire(config, request(BASE + 2_000), options)).toMatchObject({ busy: true });
    await lock.release(request(BASE + 1_000), rerun, { completed: true, mark: { fireTime: BASE + 1_000, version: -1 }, readMark: true });
    expect(lock.peekMisfire(config, request(BASE))).toEqual({ fireTime: BASE + 2_000, version: -1 });
    // The round of that mark consumes it when it completes, and not when it fails.
    const last = lock.acquire(config, request(BASE + 2_000), options);
    if ('busy' in last) throw new Error('busy');
    await lock.release(request(BASE + 2_000), last, { completed: false, readMark: true });
    expect(lock.peekMisfire(config, request(BASE))).toEqual({ fireTime: BASE + 2_000, version: -1 });
    const retried = lock.acquire(config, request(BASE + 2_000), options);
    if ('busy' in retried) throw new Error('busy');
    await lock.release(request(BASE + 2_000), retried, { completed: true, mark: { fireTime: BASE + 2_000, version: -1 }, readMark: true });
    expect(lock.peekMisfire(config, request(BASE))).toBeUndefined();
  });
});
