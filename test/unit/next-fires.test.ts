import type { JobConfig } from '../../src/shared/config/job-config';
import { parseCron } from '../../src/shared/cron/cron';
import { MAX_SCHEDULES, NextFires } from '../../src/worker/next-fires';

const config = (cron: string | undefined, timeZone = 'UTC') => ({ name: 'j', cron, timeZone }) as unknown as JobConfig;
const at = (iso: string) => Date.parse(iso);

describe('NextFires', () => {
  it('gives the first fire strictly after a time, for times in any order', () => {
    const fires = new NextFires();
    const minutely = config('0 * * * * ?');
    expect(fires.after(minutely, at('2026-11-28T12:00:10Z'))).toBe(at('2026-11-28T12:01:00Z'));
    expect(fires.after(minutely, at('2026-11-28T12:00:59.999Z'))).toBe(at('2026-11-28T12:01:00Z'));
    expect(fires.after(minutely, at('2026-11-28T12:01:00Z'))).toBe(at('2026-11-28T12:02:00Z'));
    // Backwards: before the time the kept answer was computed for.
    expect(fires.after(minutely, at('2026-11-28T11:59:30Z'))).toBe(at('2026-11-28T12:00:00Z'));
  });

  it('agrees with the schedule for times in any order, in a time zone with a DST change', () => {
    const fires = new NextFires();
    const job = config('0 30 * * * ?', 'Europe/Berlin');
    const schedule = parseCron('0 30 * * * ?', 'Europe/Berlin');
    const start = at('2026-10-25T00:00:00Z');
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648);
    for (let i = 0; i < 500; i += 1) {
      const t = start + Math.floor(random() * 4 * 3_600_000);
      expect(fires.after(job, t)).toBe(schedule.next(t));
    }
  });

  it('shares one schedule among jobs on the same cron and zone, each answered by its own expression', () => {
    const fires = new NextFires();
    const t = at('2026-11-28T12:00:10Z');
    const jobs = Array.from({ length: 3 }, () => config('0 * * * * ?'));
    for (const job of jobs) expect(fires.after(job, t)).toBe(at('2026-11-28T12:01:00Z'));
    expect(fires.size).toBe(1);
    // The same hourly expression in another zone is another schedule: Asia/Kolkata (UTC+5:30) tops its hours at :30 UTC.
    expect(fires.after(config('0 0 * * * ?', 'Asia/Kolkata'), t)).toBe(at('2026-11-28T12:30:00Z'));
    expect(fires.after(config('0 0 * * * ?'), t)).toBe(at('2026-11-28T13:00:00Z'));
    expect(fires.size).toBe(3);
  });

  it('keeps at most MAX_SCHEDULES expressions, and an expression that does not parse once', () => {
    const fires = new NextFires();
    expect(fires.after(config('not a cron'), 0)).toBe(Number.POSITIVE_INFINITY);
    expect(fires.after(config('not a cron'), 0)).toBe(Number.POSITIVE_INFINITY);
    expect(fires.size).toBe(1);
    // Dynamic jobs, each on its own daily time: every expression a new one.
    for (let i = 0; i < MAX_SCHEDULES + 10; i += 1) {
      fires.after(config(`${i % 60} ${Math.floor(i / 60) % 60} ${Math.floor(i / 3_600)} * * ?`), 0);
      expect(fires.size).toBeLessThanOrEqual(MAX_SCHEDULES);
    }
    expect(fires.size).toBeLessThan(100);
    expect(fires.after(config('0 * * * * ?'), at('2026-11-28T12:00:10Z'))).toBe(at('2026-11-28T12:01:00Z'));
  });

  it('never, for a job without a cron or with one that does not parse', () => {
    const fires = new NextFires();
    expect(fires.after(config(undefined), 0)).toBe(Number.POSITIVE_INFINITY);
    expect(fires.after(config('not a cron'), 0)).toBe(Number.POSITIVE_INFINITY);
  });

  it('answers a replaced config by its own cron, and keeps a whole answer when a time is refused', () => {
    const fires = new NextFires();
    const t = at('2026-11-28T12:00:10Z');
    expect(fires.after(config('0 * * * * ?'), t)).toBe(at('2026-11-28T12:01:00Z'));
    const hourly = config('0 0 * * * ?');
    expect(fires.after(hourly, t)).toBe(at('2026-11-28T13:00:00Z'));
    expect(() => fires.after(hourly, Number.NEGATIVE_INFINITY)).toThrow(RangeError);
    expect(fires.after(hourly, at('2026-11-28T11:10:00Z'))).toBe(at('2026-11-28T12:00:00Z'));
  });
});
