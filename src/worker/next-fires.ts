import type { JobConfig } from '../shared/config/job-config';
import { ScheduleCache, scheduleKey } from '../shared/cron/schedule-cache';

/** Expressions kept at most (with their zone), as validateCron's memo. */
export const MAX_SCHEDULES = 4_096;

/**
 * Each job's first fire after a time: the limit of a catch-up wait (ItemExecutor). A schedule is
 * parsed once per cron and time zone and shared by every job on it, so that the items of one fire
 * of many jobs on one expression (20,000 every-minute jobs) ask one schedule with the same time,
 * which it answers from its memo, instead of one parse and one search per job.
 */
export class NextFires {
  private readonly schedules = new ScheduleCache();
  /** Expressions (with their zone) that do not parse: not parsed again for every request. */
  private readonly invalid = new Set<string>();

  /** The first fire of `config`'s cron strictly after `after`; never (infinity) without a cron, or with one that never fires again. */
  after(config: JobConfig, after: number): number {
    if (!config.cron) return Number.POSITIVE_INFINITY;
    const key = scheduleKey(config.cron, config.timeZone);
    if (this.invalid.has(key)) return Number.POSITIVE_INFINITY;
    // Dynamic jobs whose crons keep changing must not grow it for ever: it starts over at the bound.
    if (this.schedules.size + this.invalid.size >= MAX_SCHEDULES) {
      this.schedules.clear();
      this.invalid.clear();
    }
    let schedule;
    try {
      schedule = this.schedules.get(config.cron, config.timeZone);
    } catch {
      this.invalid.add(key);
      return Number.POSITIVE_INFINITY; // the leader refuses such a config; here it only lifts the limit
    }
    return schedule.next(after) ?? Number.POSITIVE_INFINITY;
  }

  /** Expressions kept (parsed or known not to parse), for tests. */
  get size(): number {
    return this.schedules.size + this.invalid.size;
  }
}
