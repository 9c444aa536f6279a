import { ScheduleCache } from '../../src/shared/cron/schedule-cache';

const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);

describe('ScheduleCache.periodMs', () => {
  it("is the shortest gap between a schedule's next fires", () => {
    const cache = new ScheduleCache();
    expect(cache.periodMs('* * * * * ?', undefined, NOW)).toBe(1_000);
    expect(cache.periodMs('0 * * * * ?', undefined, NOW)).toBe(60_000);
    expect(cache.periodMs('0 0 * * * ?', 'Europe/Paris', NOW)).toBe(3_600_000);
    // Seconds 0 and 10 of each minute: the 10 s gap, not the 50 s one.
    expect(cache.periodMs('0,10 * * * * ?', undefined, NOW)).toBe(10_000);
  });

  it('is undefined for a schedule with one fire left, and remembered per expression and zone', () => {
    const cache = new ScheduleCache();
    expect(cache.periodMs('0 0 12 1 1 ? 2027', undefined, NOW)).toBeUndefined();
    expect(cache.periodMs('0 0 12 1 1 ? 2027', undefined, NOW)).toBeUndefined();
    expect(cache.periodMs('* * * * * ? 2026', 'Asia/Tokyo', NOW)).toBe(1_000);
    // Asked in 2027, when it fires no more, the remembered period answers.
    expect(cache.periodMs('* * * * * ? 2026', 'Asia/Tokyo', NOW + 365 * 86_400_000)).toBe(1_000);
    expect(new ScheduleCache().periodMs('* * * * * ? 2026', 'Asia/Tokyo', NOW + 365 * 86_400_000)).toBeUndefined();
  });

  it('throws INVALID_CRON for an expression that is not one', () => {
    expect(() => new ScheduleCache().periodMs('not a cron', undefined, NOW)).toThrow(expect.objectContaining({ code: 'SHARDCRON_INVALID_CRON' }));
  });
});
