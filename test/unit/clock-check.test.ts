import { defineJob } from '../../src/shared/config/job-definition';
import { assertClockSkew, jobsRejectingSkew } from '../../src/worker/clock-check';

const job = (name: string, maxTimeDiffSeconds: number) => defineJob({ name, maxTimeDiffSeconds, execute: () => undefined });

describe('clock skew check (maxTimeDiffSeconds)', () => {
  const jobs = [job('unchecked', -1), job('loose', 60), job('strict', 2)];

  it('only jobs with a limit below the skew reject it, in either direction', () => {
    expect(jobsRejectingSkew(jobs, 1_500).map((j) => j.name)).toEqual([]);
    expect(jobsRejectingSkew(jobs, 2_500).map((j) => j.name)).toEqual(['strict']);
    expect(jobsRejectingSkew(jobs, -90_000).map((j) => j.name)).toEqual(['loose', 'strict']);
  });

  it('names the jobs, the skew and what to do', () => {
    expect(() => assertClockSkew(jobs, -3_000)).toThrow(/3\.0 s behind ZooKeeper's.*strict \(maxTimeDiffSeconds 2\).*NTP/);
    expect(() => assertClockSkew(jobs, 1_000)).not.toThrow();
  });
});
