import type { JobConfig } from '../shared/config/job-config';
import { parseCron, type CronSchedule } from '../shared/cron/cron';

/** A config's schedule, parsed once, and its last answer: for any time in [from, fire) the next fire is `fire`. */
interface LastAnswer {
  readonly schedule: CronSchedule | null;
  from: number;
  fire: number;
}

/**
 * Each job's first fire after a time, by config (a config object is replaced, never changed): the
 * limit of a catch-up wait (ItemExecutor). Every item of a fire asks with nearly the same time, and
 * computing the cron's next fire per item was 1.8% of a busy worker's CPU, so the last answer is
 * kept: the next fire strictly after any time from the one it was computed for up to the fire it
 * gave is that fire.
 */
export class NextFires {
  private readonly answers = new WeakMap<JobConfig, LastAnswer>();

  /** The first fire of `config`'s cron strictly after `after`; never (infinity) without a cron, or with one that never fires again. */
  after(config: JobConfig, after: number): number {
    let last = this.answers.get(config);
    if (last === undefined) {
      let schedule: CronSchedule | null;
      try {
        schedule = config.cron ? parseCron(config.cron, config.timeZone) : null;
      } catch {
        schedule = null; // the leader refuses such a config; here it only lifts the limit
      }
      last = { schedule, from: Number.NaN, fire: Number.NaN };
      this.answers.set(config, last);
    }
    if (!last.schedule) return Number.POSITIVE_INFINITY;
    if (after >= last.from && after < last.fire) return last.fire;
    // Computed first: next() throws on a time that is not finite, and the answer kept must stay whole.
    const fire = last.schedule.next(after) ?? Number.POSITIVE_INFINITY;
    last.from = after;
    last.fire = fire;
    return fire;
  }
}
