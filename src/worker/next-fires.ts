import type { JobConfig } from '../shared/config/job-config';
import { parseCron, type CronSchedule } from '../shared/cron/cron';

/**
 * Each job's first fire after a time, by config (a config object is replaced, never changed): the
 * limit of a catch-up wait (ItemExecutor). A config's cron is parsed once; every item of a fire
 * then asks its schedule with nearly the same time, which the schedule answers from its memo.
 */
export class NextFires {
  private readonly schedules = new WeakMap<JobConfig, CronSchedule | null>();

  /** The first fire of `config`'s cron strictly after `after`; never (infinity) without a cron, or with one that never fires again. */
  after(config: JobConfig, after: number): number {
    let schedule = this.schedules.get(config);
    if (schedule === undefined) {
      try {
        schedule = config.cron ? parseCron(config.cron, config.timeZone) : null;
      } catch {
        schedule = null; // the leader refuses such a config; here it only lifts the limit
      }
      this.schedules.set(config, schedule);
    }
    return schedule?.next(after) ?? Number.POSITIVE_INFINITY;
  }
}
