import { parseCron, type CronSchedule } from './cron';

/**
 * Parsed schedules shared by every job with the same cron and time zone (a parsed expression is
 * immutable apart from its own memo), so 10,000 jobs on a few schedules hold a few parses.
 */
/** The key of a cron expression in a time zone, for maps of what its schedule gives. */
export const scheduleKey = (cron: string, timeZone: string | undefined): string => `${timeZone ?? ''}\u0000${cron}`;

export class ScheduleCache {
  private readonly parsed = new Map<string, CronSchedule>();

  /** The schedule of `cron` in `timeZone`; throws INVALID_CRON like parseCron. */
  get(cron: string, timeZone: string | undefined): CronSchedule {
    const key = scheduleKey(cron, timeZone);
    let schedule = this.parsed.get(key);
    if (!schedule) {
      schedule = parseCron(cron, timeZone);
      this.parsed.set(key, schedule);
    }
    return schedule;
  }

  clear(): void {
    this.parsed.clear();
  }
}
