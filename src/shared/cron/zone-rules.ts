/**
 * IANA time zones for cron schedules: UTC offsets read from Intl and cached per year, and the one
 * DST rule that maps a local wall-clock time to an instant ({@link ZoneRules.resolve}). Pure apart
 * from reading the runtime's zone data. The rules, with Berlin and New York examples: docs/cron.md.
 */

const SECOND = 1000;
const DAY = 86_400_000;

/** One offset change of a zone. */
export interface Transition {
  /** Instant (epoch ms) of the change. */
  readonly at: number;
  /** UTC offsets in ms before and after. */
  readonly before: number;
  readonly after: number;
}

interface YearRules {
  readonly start: number;
  readonly end: number;
  readonly startOffset: number;
  readonly transitions: readonly Transition[];
}

/** How one local wall-clock time maps to an instant. */
export type Resolved =
  | { kind: 'normal'; instant: number }
  | { kind: 'gap'; instant: number; endWall: number } // did not exist; instant = shifted forward by the gap
  | { kind: 'ambiguous'; first: number; endWall: number }; // happened twice; first occurrence

/**
 * UTC offsets of one zone, from Intl. Offsets are sampled once per day of a year (then bisected to the
 * second) and cached per year, so lookups on the hot path cost a binary search, not an Intl call (~4 µs).
 * Assumes a zone changes offset at most once within any 4 days, true of every zone since 1970.
 */
export class ZoneRules {
  private readonly years = new Map<number, YearRules>();
  private last: YearRules | undefined;
  private readonly fmt: Intl.DateTimeFormat;

  constructor(timeZone: string) {
    this.fmt = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
  }

  /** UTC offset (ms, local minus UTC) in force at instant `t`. */
  offsetAt(t: number): number {
    const yr = this.yearOf(t);
    let offset = yr.startOffset;
    for (const tr of yr.transitions) {
      if (t < tr.at) break;
      offset = tr.after;
    }
    return offset;
  }

  /** The transition within 2 days of `t`, if any. */
  transitionNear(t: number): Transition | undefined {
    const a = this.yearOf(t - 2 * DAY);
    const b = this.yearOf(t + 2 * DAY);
    for (const yr of a === b ? [a] : [a, b]) for (const tr of yr.transitions) if (Math.abs(tr.at - t) <= 2 * DAY) return tr;
    return undefined;
  }

  /**
   * THE DST RULE (the only place it lives): a local time skipped by a spring-forward fires at the same
   * distance past the transition (02:30 in Berlin on 2026-03-29 -> 03:30 CEST), as Quartz does; a local
   * time repeated by a fall-back fires at its first occurrence. Schedule.next() (cron.ts) adds one exception:
   * expressions that fire every hour also fire in the repeated hour, see there.
   */
  resolve(wall: number): Resolved {
    const tr = this.transitionNear(wall);
    if (!tr) return { kind: 'normal', instant: wall - this.offsetAt(wall) };
    const lo = tr.at + Math.min(tr.before, tr.after);
    const hi = tr.at + Math.max(tr.before, tr.after);
    if (wall < lo) return { kind: 'normal', instant: wall - tr.before };
    if (wall >= hi) return { kind: 'normal', instant: wall - tr.after };
    return tr.after > tr.before
      ? { kind: 'gap', instant: wall - tr.before, endWall: hi }
      : { kind: 'ambiguous', first: wall - tr.before, endWall: hi };
  }

  private yearOf(t: number): YearRules {
    const l = this.last;
    if (l && t >= l.start && t < l.end) return l;
    const y = new Date(t).getUTCFullYear();
    let yr = this.years.get(y);
    if (!yr) {
      yr = this.build(y);
      this.years.set(y, yr);
    }
    this.last = yr;
    return yr;
  }

  private build(y: number): YearRules {
    const start = Date.UTC(y, 0, 1);
    const end = Date.UTC(y + 1, 0, 1);
    const startOffset = this.intlOffset(start);
    const transitions: Transition[] = [];
    let lo = start;
    let loOffset = startOffset;
    while (lo < end) {
      const hi = Math.min(lo + DAY, end);
      const hiOffset = this.intlOffset(hi);
      if (hiOffset !== loOffset) {
        let a = lo;
        let b = hi;
        while (b - a > SECOND) {
          const mid = a + Math.floor((b - a) / (2 * SECOND)) * SECOND;
          if (this.intlOffset(mid) === loOffset) a = mid;
          else b = mid;
        }
        transitions.push({ at: b, before: loOffset, after: this.intlOffset(b) });
      }
      lo = hi;
      loOffset = hiOffset;
    }
    return { start, end, startOffset, transitions };
  }

  private intlOffset(t: number): number {
    const p: Record<string, number> = {};
    for (const part of this.fmt.formatToParts(t)) if (part.type !== 'literal') p[part.type] = Number(part.value);
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - t;
  }
}

const zoneCache = new Map<string, ZoneRules | null>();

/** Rules of a valid zone, or null for zones that are UTC (no offsets to apply). */
export function zoneRules(timeZone: string): ZoneRules | null {
  let z = zoneCache.get(timeZone);
  if (z === undefined) {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone }).resolvedOptions().timeZone;
    z = resolved === 'UTC' || resolved === 'Etc/UTC' ? null : new ZoneRules(timeZone);
    zoneCache.set(timeZone, z);
  }
  return z;
}

const validZones = new Map<string, boolean>();

/**
 * True when `tz` is an IANA time zone name this runtime knows ("Europe/Berlin", "UTC", "Etc/GMT-2";
 * matched case-insensitively, as Intl does). Fixed offsets such as "+02:00" or "UTC+2" are rejected on
 * purpose: they hide DST, and what Intl accepts varies with the Node version; use "Etc/GMT-2" instead.
 */
export function isValidTimeZone(tz: string): boolean {
  if (typeof tz !== 'string' || !/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/.test(tz)) return false;
  if (/^(?:UTC|GMT|UT)[+-]/i.test(tz)) return false;
  let valid = validZones.get(tz);
  if (valid === undefined) {
    // Building an Intl formatter costs ~50 µs and configs are re-validated on every ZooKeeper read.
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
      valid = true;
    } catch {
      valid = false;
    }
    if (validZones.size >= 1000) validZones.clear(); // bounded: names come from user input
    validZones.set(tz, valid);
  }
  return valid;
}
