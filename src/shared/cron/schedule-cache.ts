import { parseCron, type CronSchedule } from './cron';

/**
 * Parsed schedules shared by every job with the same cron and time zone (a parsed expression is
 * immutable apart from its own memo), so 10,000 jobs on a few schedules hold a few parses.
 */
/** The key of a cron expression in a time zone, for maps of what its schedule gives. */
export const scheduleKey = (cron: string, timeZone: string | undefined): string => `${timeZone ?? ''}\u0000${cron}`;

/** Fires looked at to tell a schedule's period ({@link ScheduleCache.periodMs}). */
const PERIOD_SAMPLE = 4;

export class ScheduleCache {
  /** Each expression's schedule, or the error it failed to parse with (not parsed again). */
  private readonly parsed = new Map<string, CronSchedule | Error>();
  private readonly periods = new Map<string, number | undefined>();

  /** `maxEntries`: expressions kept at most; the cache starts over at the bound (default: no bound). */
  constructor(private readonly maxEntries = Number.POSITIVE_INFINITY) {}

  /** The schedule of `cron` in `timeZone`; throws INVALID_CRON like parseCron. */
  get(cron: string, timeZone: string | undefined): CronSchedule {
    const key = scheduleKey(cron, timeZone);
    let schedule = this.parsed.get(key);
    if (!schedule) {
      if (this.parsed.size >= this.maxEntries) this.clear();
      try {
        schedule = parseCron(cron, timeZone);
      } catch (err) {
        schedule = err instanceof Error ? err : new Error(String(err));
      }
      this.parsed.set(key, schedule);
    }
    if (schedule instanceof Error) throw schedule;
    return schedule;
  }

  /**
   * How often `cron` fires: the shortest gap between its next few fires after `fromMs`, worked out
   * once per expression and zone; undefined for a schedule with fewer than two fires left (a
   * one-shot). Throws INVALID_CRON like parseCron.
   */
  periodMs(cron: string, timeZone: string | undefined, fromMs: number): number | undefined {
    const key = scheduleKey(cron, timeZone);
    if (this.periods.has(key)) return this.periods.get(key);
    const fires = this.get(cron, timeZone).between(fromMs, Number.MAX_SAFE_INTEGER, PERIOD_SAMPLE);
    let period: number | undefined;
    for (let i = 1; i < fires.length; i += 1) period = Math.min(period ?? Infinity, fires[i] - fires[i - 1]);
    this.periods.set(key, period);
    return period;
  }

  /**
   * {@link periodMs} of a job's schedule, for ordering and priorities: undefined also without a
   * cron and for an expression that does not parse (the job registry reports those; such a job
   * never fires).
   */
  jobPeriodMs(schedule: { cron?: string | undefined; timeZone?: string | undefined } | undefined, fromMs: number): number | undefined {
    if (!schedule?.cron) return undefined;
    try {
      return this.periodMs(schedule.cron, schedule.timeZone, fromMs);
    } catch {
      return undefined;
    }
  }

  /** Expressions (with their zone) kept, parsed or refused. */
  get size(): number {
    return this.parsed.size;
  }

  clear(): void {
    this.parsed.clear();
    this.periods.clear();
  }
}
