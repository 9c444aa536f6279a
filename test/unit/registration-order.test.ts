import { soonestFirst } from '../../src/worker/instance-registration';

describe('soonestFirst (the order a worker registers its jobs in)', () => {
  const now = Date.UTC(2026, 10, 26, 12, 30, 15, 500);
  const jobs = [
    { name: 'daily', cron: '0 0 3 * * ?', timeZone: 'UTC' },
    { name: 'trigger-only', cron: undefined, timeZone: 'UTC' },
    { name: 'hourly', cron: '0 0 * * * ?', timeZone: 'UTC' },
    { name: 'every-second', cron: '* * * * * ?', timeZone: 'UTC' },
    { name: 'broken', cron: 'not a cron', timeZone: 'UTC' },
    { name: 'minutely', cron: '0 * * * * ?', timeZone: 'UTC' },
    { name: 'every-second-too', cron: '* * * * * ?', timeZone: 'UTC' },
    { name: 'berlin-hourly-half', cron: '0 30 * * * ?', timeZone: 'Europe/Berlin' },
  ];

  it('puts the jobs that fire soonest first, keeps ties in their order, and those that never fire on a schedule last', () => {
    expect(soonestFirst(jobs, (j) => j, now).map((j) => j.name)).toEqual([
      'every-second',
      'every-second-too',
      'minutely',
      'hourly',
      'berlin-hourly-half',
      'daily',
      'trigger-only',
      'broken',
    ]);
  });

  it("reads each entry's config once and leaves its input as it was", () => {
    const copy = [...jobs];
    const reads: string[] = [];
    soonestFirst(jobs, (j) => (reads.push(j.name), j), now);
    expect(reads).toHaveLength(jobs.length);
    expect(jobs).toEqual(copy);
  });
});
