import type { JobConfig } from '../shared/config/job-config';
import { ScheduleCache } from '../shared/cron/schedule-cache';

/**
 * Each job's first fire after a time: the limit of a catch-up wait (ItemExecutor). A schedule is
 * parsed once per cron and time zone and shared by every job on it, so that the items of one fire
 * of many jobs on one expression (20,000 every-minute jobs) ask one schedule with the same time,
 * which it answers from its memo, instead of one parse and one search per job.
 */
export class NextFires {
  private readonly schedules = new ScheduleCache();

  /** The first fire of `config`'s cron strictly after `after`; never (infinity) without a cron, or with one that never fires again. */
  after(config: JobConfig, after: number): number {
    if (!config.cron) return Number.POSITIVE_INFINITY;
    let schedule;
    try {
      schedule = this.schedules.get(config.cron, config.timeZone);
    } catch {
      return Number.POSITIVE_INFINITY; // the leader refuses such a config; here it only lifts the limit
    }
    return schedule.next(after) ?? Number.POSITIVE_INFINITY;
  }
}
