import type { JobConfig } from '../shared/config/job-config';
import type { CronSchedule } from '../shared/cron/cron';
import { ScheduleCache } from '../shared/cron/schedule-cache';

/** Expressions (with their zone) the shared cache keeps at most, as validateCron's memo. */
export const MAX_SCHEDULES = 4_096;

/**
 * Each job's first fire after a time: the limit of a catch-up wait (ItemExecutor), asked for every
 * request. A config (replaced, never changed) finds its schedule in a WeakMap, one lookup; the
 * schedule comes from a cache shared by every job on the same cron and time zone, so that the
 * items of one fire of many jobs on one expression (20,000 every-minute jobs) share one parse and
 * one memo instead of one each. The shared cache is bounded; a config keeps its schedule however.
 */
export class NextFires {
  private readonly shared = new ScheduleCache(MAX_SCHEDULES);
  /** Each config's schedule; null without a cron, or with one that does not parse. */
  private readonly byConfig = new WeakMap<JobConfig, CronSchedule | null>();

  /** The first fire of `config`'s cron strictly after `after`; never (infinity) without a cron, or with one that never fires again. */
  after(config: JobConfig, after: number): number {
    let schedule = this.byConfig.get(config);
    if (schedule === undefined) {
      try {
        schedule = config.cron ? this.shared.get(config.cron, config.timeZone) : null;
      } catch {
        schedule = null; // the leader refuses such a config; here it only lifts the limit
      }
      this.byConfig.set(config, schedule);
    }
    return schedule?.next(after) ?? Number.POSITIVE_INFINITY;
  }

  /** Expressions the shared cache keeps (parsed or refused), for tests. */
  get size(): number {
    return this.shared.size;
  }
}
