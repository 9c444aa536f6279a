/**
 * Cron schedules: Quartz style (6 or 7 fields, seconds first, as ElasticJob users write them) and
 * classic Unix (5 fields), evaluated in an IANA time zone with explicit DST rules (docs/cron.md).
 *
 * Why not delegate to cron-parser: measured in this repo, its luxon-based `next()` costs 8-370 µs
 * per call even in UTC (a daily job ~80 µs, a monthly one ~370 µs), while a leader may ask for 10,000
 * next fire times a second. It also uses Unix weekday numbers, ORs day-of-month with day-of-week, and
 * has no W, L-n or year field. So expressions are compiled here into plain lookup tables, searched in
 * local wall-clock time, and mapped to instants by one DST rule ({@link ZoneRules.resolve}).
 * cron-parser stays as the independent oracle of the unit tests.
 *
 * Layout: cron-syntax.ts parses the text into value tables and day rules, zone-rules.ts maps local
 * times to instants, and this file holds the schedule that searches them.
 */
import { assertCanFire, compile, dayMask, FieldError, YEAR_MAX, YEAR_MIN, type Compiled } from './cron-syntax';
import { ErrorCodes, ShardcronError } from '../errors';
import { isValidTimeZone, zoneRules, type ZoneRules } from './zone-rules';

// Re-exported so callers (job-config, tests) keep importing every cron helper from this one module.
export { isValidTimeZone };

/** A parsed cron expression bound to a time zone. Pure (its memo of the last answer aside): reads no clock; safe to share. */
export interface CronSchedule {
  /** The expression as the user gave it. */
  readonly expression: string;
  /** IANA time zone the expression is evaluated in. */
  readonly timeZone: string;
  /** The first fire time strictly after `afterMs` (epoch ms), or null if the expression never fires again. */
  next(afterMs: number): number | null;
  /** Fire times in (fromMs, toMs], earliest first, at most `limit` of them (missed-fire catch-up, dashboard). */
  between(fromMs: number, toMs: number, limit: number): number[];
}

const SECOND = 1000;

/** table[v] = smallest allowed value >= v, or -1. */
function nextTable(values: readonly number[], size: number): Int16Array {
  const t = new Int16Array(size + 1).fill(-1);
  for (const v of values) t[v] = v;
  for (let v = size - 2; v >= 0; v--) if (t[v] < 0) t[v] = t[v + 1];
  return t;
}

class Schedule implements CronSchedule {
  private readonly nextSecond: Int16Array;
  private readonly nextMinute: Int16Array;
  private readonly nextHour: Int16Array;
  private readonly nextMonth: Int16Array;
  /** Fires every hour: such expressions describe an interval, so the repeated fall-back hour fires too. */
  private readonly everyHour: boolean;
  private maskKey = -1;
  private mask = 0;
  /**
   * The last answer of {@link next}: for any time from `lastFrom` up to `lastFire` the next fire is
   * `lastFire`. Callers ask with nearly the same time over and over (every item of a fire, every
   * job of a schedule at a load), and a walk of the fields per call was 1.8% of a busy worker's CPU.
   */
  private lastFrom = Number.NaN;
  private lastFire = Number.NaN;

  constructor(
    readonly expression: string,
    readonly timeZone: string,
    private readonly c: Compiled,
    private readonly zone: ZoneRules | null,
  ) {
    this.nextSecond = nextTable(c.seconds, 60);
    this.nextMinute = nextTable(c.minutes, 60);
    this.nextHour = nextTable(c.hours, 24);
    this.nextMonth = nextTable(c.months, 13);
    this.everyHour = c.hours.length === 24;
  }

  next(afterMs: number): number | null {
    if (!Number.isFinite(afterMs)) throw new RangeError(`next(afterMs): expected a finite epoch ms, got ${afterMs}`);
    const after = Math.floor(afterMs); // fire times are whole seconds, so this changes no answer
    if (after >= this.lastFrom && after < this.lastFire) return this.lastFire;
    const fire = this.seek(after);
    if (fire !== null) {
      this.lastFrom = after;
      this.lastFire = fire;
    }
    return fire;
  }

  /** {@link next} without its memo. */
  private seek(after: number): number | null {
    const zone = this.zone;
    if (!zone) return this.seekWall(after);
    let best = this.forward(zone, after);
    const tr = zone.transitionNear(after);
    if (tr && tr.after > tr.before && after >= tr.at && after < tr.at + tr.after - tr.before) {
      // Just after a spring-forward, skipped local times that were shifted past `after` still fire,
      // although their wall time is behind the clock: forward() cannot see them.
      const w = this.seekWall(after + tr.before);
      if (w !== null && w < tr.at + tr.after) best = min(best, w - tr.before);
    } else if (tr && tr.after < tr.before && this.everyHour && after < tr.at + tr.before - tr.after) {
      // Hourly and finer expressions keep their rhythm through a fall-back: the repeated hour's second
      // pass fires too (its instants differ from the first pass, so fire times stay unique).
      const w = this.seekWall(Math.max(after + tr.after, tr.at + tr.after - 1));
      if (w !== null && w < tr.at + tr.before) best = min(best, w - tr.after);
    }
    return best;
  }

  between(fromMs: number, toMs: number, limit: number): number[] {
    const out: number[] = [];
    for (let t = this.next(fromMs); t !== null && t <= toMs && out.length < limit; t = this.next(t)) out.push(t);
    return out;
  }

  /** First fire after `after` found by walking wall-clock time forward from the local time at `after`. */
  private forward(zone: ZoneRules, after: number): number | null {
    let x = after + zone.offsetAt(after);
    let best: number | null = null;
    for (let i = 0; i < 8; i++) {
      const w = this.seekWall(x);
      if (w === null) return best;
      const r = zone.resolve(w);
      if (r.kind === 'normal') {
        if (r.instant > after) return min(best, r.instant);
        x = w;
      } else if (r.kind === 'ambiguous') {
        if (r.first > after) return min(best, r.first);
        x = r.endWall - 1; // `after` is in the repeated hour's second pass: its first occurrences are gone
      } else {
        // A shifted gap time lands inside the first real hour after the gap, where a real time may fire earlier.
        best = min(best, r.instant);
        x = r.endWall - 1;
      }
    }
    return best;
  }

  /** Smallest wall-clock time (local time written as if it were UTC) strictly after `x` that matches. */
  private seekWall(x: number): number | null {
    let t = Math.floor(x / SECOND) * SECOND + SECOND;
    // Field by field, largest first: a field with no allowed value left carries into the next larger
    // one (Date.UTC normalises the overflow, then we start over); otherwise it jumps to its next allowed
    // value and the smaller fields restart at their minimum. One or two passes are typical.
    for (;;) {
      const at = new Date(t);
      const y = at.getUTCFullYear();
      let mo = at.getUTCMonth() + 1;
      let d = at.getUTCDate();
      let h = at.getUTCHours();
      let mi = at.getUTCMinutes();
      let s = at.getUTCSeconds();
      // Every expression, with or without a year field, ranges over Quartz's years 1970-2199.
      if (y > YEAR_MAX) return null;
      if (y < YEAR_MIN) {
        t = Date.UTC(YEAR_MIN, 0, 1);
        continue;
      }
      const years = this.c.years;
      if (years && !years.includes(y)) {
        const ny = years.find((v) => v > y);
        if (ny === undefined) return null; // the year field lies in the past: never fires again
        t = Date.UTC(ny, 0, 1);
        continue;
      }
      const nmo = this.nextMonth[mo];
      if (nmo < 0) {
        t = Date.UTC(y + 1, 0, 1);
        continue;
      }
      if (nmo !== mo) {
        mo = nmo;
        d = 1;
        h = mi = s = 0;
      }
      const ahead = this.dayMask(y, mo) >>> d; // matching days >= d
      if (ahead === 0) {
        t = Date.UTC(y, mo, 1);
        continue;
      }
      const nd = d + 31 - Math.clz32(ahead & -ahead);
      if (nd !== d) {
        d = nd;
        h = mi = s = 0;
      }
      const nh = this.nextHour[h];
      if (nh < 0) {
        t = Date.UTC(y, mo - 1, d + 1);
        continue;
      }
      if (nh !== h) {
        h = nh;
        mi = s = 0;
      }
      const nmi = this.nextMinute[mi];
      if (nmi < 0) {
        t = Date.UTC(y, mo - 1, d, h + 1);
        continue;
      }
      if (nmi !== mi) {
        mi = nmi;
        s = 0;
      }
      const ns = this.nextSecond[s];
      if (ns < 0) {
        t = Date.UTC(y, mo - 1, d, h, mi + 1);
        continue;
      }
      return Date.UTC(y, mo - 1, d, h, mi, ns);
    }
  }

  private dayMask(y: number, mo: number): number {
    const key = y * 12 + mo;
    if (key !== this.maskKey) {
      this.mask = dayMask(this.c, y, mo);
      this.maskKey = key;
    }
    return this.mask;
  }
}

function min(a: number | null, b: number): number {
  return a === null || b < a ? b : a;
}

/**
 * Parses a cron expression for `timeZone` (IANA, default UTC). Six or seven fields are Quartz
 * (`sec min hour dom month dow [year]`, days of week 1-7 from SUN); five fields are Unix
 * (`min hour dom month dow`, days of week 0-7 with 0 and 7 = SUN). Parse once, then call next() freely.
 *
 * @throws ShardcronError with code INVALID_CRON, naming the expression and the field (`details.field`,
 *   which is `timeZone` for a bad zone) when the expression is malformed or cannot be honoured exactly.
 */
export function parseCron(expression: string, timeZone = 'UTC'): CronSchedule {
  if (typeof expression !== 'string') {
    throw new ShardcronError(ErrorCodes.INVALID_CRON, `Invalid cron expression: expected a string, got ${typeof expression}`, { field: 'cron' });
  }
  if (!isValidTimeZone(timeZone)) {
    throw new ShardcronError(
      ErrorCodes.INVALID_CRON,
      `Invalid timeZone ${JSON.stringify(timeZone)} for cron expression "${expression}": expected an IANA name such as "Europe/Berlin" or "UTC" (fixed offsets like "+02:00" are not accepted; "Etc/GMT-2" is UTC+2)`,
      { expression, timeZone, field: 'timeZone' },
    );
  }
  let compiled: Compiled;
  try {
    compiled = compile(expression);
    assertCanFire(compiled);
  } catch (err) {
    if (!(err instanceof FieldError)) throw err;
    throw new ShardcronError(ErrorCodes.INVALID_CRON, `Invalid cron expression "${expression}": ${err.message}`, {
      expression, timeZone, ...(err.field ? { field: err.field } : {}),
    });
  }
  return new Schedule(expression, timeZone, compiled, zoneRules(timeZone));
}

/** Expressions (with their time zone) known valid: {@link validateCron}'s memo. */
const knownValid = new Set<string>();
/** Distinct valid expressions remembered at most; the memo starts over beyond it. */
const KNOWN_VALID_MAX = 4_096;

/**
 * For schemas: the INVALID_CRON message for `expression` in `timeZone`, or null when it is valid.
 * Valid pairs are remembered: every config read (a worker's or leader's 100,000 jobs, each on one of a
 * few schedules) validates its cron, and parsing it each time was 6% of a joining worker's CPU.
 */
export function validateCron(expression: string, timeZone?: string): string | null {
  const key = `${timeZone ?? ''}\u0000${expression}`;
  if (knownValid.has(key)) return null;
  try {
    parseCron(expression, timeZone);
    if (knownValid.size >= KNOWN_VALID_MAX) knownValid.clear();
    knownValid.add(key);
    return null;
  } catch (err) {
    if (err instanceof ShardcronError && err.code === ErrorCodes.INVALID_CRON) return err.message;
    throw err;
  }
}
