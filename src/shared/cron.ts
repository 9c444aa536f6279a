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
 */
import { ErrorCodes, ShardcronError } from './errors';

/** A parsed cron expression bound to a time zone. Pure: reads no clock; safe to share. */
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

type FieldName = 'seconds' | 'minutes' | 'hours' | 'day-of-month' | 'month' | 'day-of-week' | 'year';

interface FieldSpec {
  readonly name: FieldName;
  readonly min: number;
  readonly max: number;
  readonly names?: Readonly<Record<string, number>>;
  /** Quartz lets a range run past the end (`22-2`, `FRI-MON`); Unix cron does not. */
  readonly wrap: boolean;
}

const SECOND = 1000;
const DAY = 86_400_000;
/** Quartz accepts years 1970-2199. */
const YEAR_MIN = 1970;
const YEAR_MAX = 2199;
const MAX_EXPRESSION_LENGTH = 1024;
/** Hard stop of the wall-clock search; an accepted expression always fires long before this. */
const SEARCH_YEAR_MAX = 9999;
const MONTH_NAMES = { JAN: 1, FEB: 2, MAR: 3, APR: 4, MAY: 5, JUN: 6, JUL: 7, AUG: 8, SEP: 9, OCT: 10, NOV: 11, DEC: 12 };
const QUARTZ_DAY_NAMES = { SUN: 1, MON: 2, TUE: 3, WED: 4, THU: 5, FRI: 6, SAT: 7 };
const UNIX_DAY_NAMES = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };

const SPEC = {
  seconds: { name: 'seconds', min: 0, max: 59, wrap: true },
  minutes: { name: 'minutes', min: 0, max: 59, wrap: true },
  hours: { name: 'hours', min: 0, max: 23, wrap: true },
  dom: { name: 'day-of-month', min: 1, max: 31, wrap: true },
  month: { name: 'month', min: 1, max: 12, names: MONTH_NAMES, wrap: true },
  quartzDow: { name: 'day-of-week', min: 1, max: 7, names: QUARTZ_DAY_NAMES, wrap: true },
  year: { name: 'year', min: YEAR_MIN, max: YEAR_MAX, wrap: false },
} as const satisfies Record<string, FieldSpec>;
const UNIX_SPEC = {
  minutes: { ...SPEC.minutes, wrap: false },
  hours: { ...SPEC.hours, wrap: false },
  dom: { ...SPEC.dom, wrap: false },
  month: { ...SPEC.month, wrap: false },
  dow: { name: 'day-of-week', min: 0, max: 7, names: UNIX_DAY_NAMES, wrap: false },
} as const satisfies Record<string, FieldSpec>;

/** Thrown inside the parser; parseCron adds the expression and time zone. */
class FieldError extends Error {
  constructor(readonly field: FieldName | null, message: string) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing: text -> value sets and day rules
// ---------------------------------------------------------------------------------------------

/** Day-of-month part of a day rule; days are 1-31, offsets count back from the month's last day. */
interface DomRule {
  days: number[];
  lastOffsets: number[]; // L (0), L-3 (3)
  nearest: number[]; // 15W
  lastNearest: number[]; // LW (0), L-3W (3)
}
/** Day-of-week part; weekdays are JS numbers (0 = Sunday), whatever the expression's numbering. */
interface DowRule {
  weekdays: number[];
  last: number[]; // 6L in Quartz = last Friday -> 5
  nth: Array<readonly [weekday: number, k: number]>; // 6#3 in Quartz = third Friday -> [5, 3]
}

interface Compiled {
  seconds: number[];
  minutes: number[];
  hours: number[];
  months: number[];
  years: number[] | null; // null = any year
  dom: DomRule | null; // null = unrestricted (`*` or `?`)
  dow: DowRule | null;
  /** Unix cron fires when either day field matches if both are restricted; Quartz forbids that case. */
  dayCombine: 'and' | 'or';
}

function fail(field: FieldName | null, message: string): never {
  throw new FieldError(field, message);
}

function parseNumber(spec: FieldSpec, token: string, text: string): number {
  let v: number;
  if (/^\d+$/.test(token)) v = Number(token);
  else if (spec.names && Object.hasOwn(spec.names, token)) return spec.names[token];
  else return fail(spec.name, `${spec.name} field "${text}": "${token}" is not a number${spec.names ? ' or a name' : ''}`);
  if (v < spec.min || v > spec.max) {
    const hint = spec === SPEC.quartzDow && v === 0 ? ' (6-7 field expressions number days 1-7 with 1 = SUN)' : '';
    fail(spec.name, `${spec.name} field "${text}": ${v} is out of range ${spec.min}-${spec.max}${hint}`);
  }
  return v;
}

const ITEM = /^(\*|\d+|[A-Z]{3})(?:-(\d+|[A-Z]{3}))?(?:\/(\d+))?$/;

/** Expands `*`, `a`, `a-b`, `a/n`, `*\/n`, `a-b/n` (Quartz-style wrapping where allowed). */
function expandItem(spec: FieldSpec, item: string, text: string): number[] | null {
  const m = ITEM.exec(item);
  if (!m) return null;
  const [, startTok, endTok, stepTok] = m as unknown as [string, string, string | undefined, string | undefined];
  if (startTok === '*' && endTok !== undefined) fail(spec.name, `${spec.name} field "${text}": "*" cannot start a range`);
  const span = spec.max - spec.min + 1;
  const lo = startTok === '*' ? spec.min : parseNumber(spec, startTok, text);
  let hi = startTok === '*' ? spec.max : endTok !== undefined ? parseNumber(spec, endTok, text) : stepTok ? spec.max : lo;
  const step = stepTok === undefined ? 1 : Number(stepTok);
  if (!(step >= 1 && step <= span)) fail(spec.name, `${spec.name} field "${text}": step ${stepTok} must be between 1 and ${span}`);
  if (hi < lo) {
    if (!spec.wrap) fail(spec.name, `${spec.name} field "${text}": range ${lo}-${hi} runs backwards`);
    hi += span;
  }
  const out: number[] = [];
  for (let v = lo; v <= hi; v += step) out.push(v > spec.max ? v - span : v);
  return out;
}

function sortedUnique(values: number[]): number[] {
  return [...new Set(values)].sort((a, b) => a - b);
}

function parsePlainField(spec: FieldSpec, text: string): number[] {
  if (text === '?') fail(spec.name, `${spec.name} field "?": ? is only allowed in day-of-month or day-of-week`);
  const values: number[] = [];
  for (const item of splitList(spec, text)) {
    const v = expandItem(spec, item, text);
    if (v === null) fail(spec.name, `${spec.name} field "${text}": cannot read "${item}"; expected *, a value, a range a-b, or a step a/n, */n, a-b/n`);
    values.push(...v);
  }
  return sortedUnique(values);
}

function splitList(spec: FieldSpec, text: string): string[] {
  const items = text.split(',');
  if (items.some((i) => i === '')) fail(spec.name, `${spec.name} field "${text}": empty list item`);
  if (items.length > 1 && items.includes('?')) fail(spec.name, `${spec.name} field "${text}": ? must stand alone`);
  return items;
}

function parseDom(spec: FieldSpec, text: string): DomRule {
  const rule: DomRule = { days: [], lastOffsets: [], nearest: [], lastNearest: [] };
  for (const item of splitList(spec, text)) {
    const last = /^L(?:-(\d+))?(W?)$/.exec(item);
    if (last) {
      const offset = last[1] === undefined ? 0 : Number(last[1]);
      if (offset > 30) fail(spec.name, `${spec.name} field "${text}": offset in "${item}" must be at most 30`);
      (last[2] ? rule.lastNearest : rule.lastOffsets).push(offset);
      continue;
    }
    const w = /^(\d+)W$/.exec(item);
    if (w) {
      rule.nearest.push(parseNumber(spec, w[1] as string, text));
      continue;
    }
    const v = expandItem(spec, item, text);
    if (v === null) {
      fail(spec.name, `${spec.name} field "${text}": cannot read "${item}"; expected a day 1-31, a range, a step, L, L-n, nW, LW or ?`);
    }
    rule.days.push(...v);
  }
  return rule;
}

function parseDow(spec: FieldSpec, text: string, quartz: boolean): DowRule {
  // Quartz numbers days 1-7 from Sunday, Unix 0-7 with 0 and 7 both Sunday; rules hold JS weekdays.
  const toWeekday = (v: number): number => (quartz ? v - 1 : v % 7);
  if (text === 'L') {
    if (!quartz) fail(spec.name, `${spec.name} field "L": a lone L (Saturday in Quartz) is not allowed in 5-field expressions; write 6`);
    return { weekdays: [6], last: [], nth: [] };
  }
  const rule: DowRule = { weekdays: [], last: [], nth: [] };
  for (const item of splitList(spec, text)) {
    const last = /^(\d+|[A-Z]{3})L$/.exec(item);
    if (last) {
      rule.last.push(toWeekday(parseNumber(spec, last[1] as string, text)));
      continue;
    }
    const nth = /^(\d+|[A-Z]{3})#(\d+)$/.exec(item);
    if (nth) {
      const k = Number(nth[2]);
      if (k < 1 || k > 5) fail(spec.name, `${spec.name} field "${text}": the number after # in "${item}" must be 1-5`);
      rule.nth.push([toWeekday(parseNumber(spec, nth[1] as string, text)), k]);
      continue;
    }
    const v = expandItem(spec, item, text);
    if (v === null) {
      const range = quartz ? '1-7 (1 = SUN) or SUN-SAT' : '0-7 (0 or 7 = SUN) or SUN-SAT';
      fail(spec.name, `${spec.name} field "${text}": cannot read "${item}"; expected a day ${range}, a range, a step, nL, n#k or ?`);
    }
    rule.weekdays.push(...v.map(toWeekday));
  }
  return rule;
}

function compile(expression: string): Compiled {
  // Expressions also arrive through the HTTP API; a bound keeps validation cheap whatever is sent.
  if (expression.length > MAX_EXPRESSION_LENGTH) fail(null, `longer than ${MAX_EXPRESSION_LENGTH} characters`);
  const raw = expression.trim();
  if (raw.startsWith('@')) fail(null, `macros such as ${raw.split(/\s/)[0]} are not supported; write the fields out, e.g. "0 0 0 * * ?" for daily`);
  const f = raw === '' ? [] : raw.toUpperCase().split(/\s+/);
  if (f.length < 5 || f.length > 7) {
    fail(null, `expected 5 fields (Unix: minute hour day-of-month month day-of-week) or 6-7 fields (Quartz: seconds minutes hours day-of-month month day-of-week [year]), got ${f.length}`);
  }
  const quartz = f.length >= 6;
  const [sec, min, hour, dom, month, dow, year] = (quartz ? f : ['0', ...f]) as [string, string, string, string, string, string, string?];
  const spec = quartz ? SPEC : { ...SPEC, ...UNIX_SPEC };
  const domRestricted = dom !== '*' && dom !== '?';
  const dowRestricted = dow !== '*' && dow !== '?';
  const compiled: Compiled = {
    seconds: parsePlainField(SPEC.seconds, sec),
    minutes: parsePlainField(spec.minutes, min),
    hours: parsePlainField(spec.hours, hour),
    months: parsePlainField(spec.month, month),
    years: year === undefined || year === '*' ? null : parsePlainField(SPEC.year, year),
    dom: domRestricted ? parseDom(spec.dom, dom) : null,
    dow: dowRestricted ? parseDow(quartz ? SPEC.quartzDow : UNIX_SPEC.dow, dow, quartz) : null,
    dayCombine: quartz ? 'and' : 'or',
  };
  if (quartz && domRestricted && dowRestricted) {
    // cron-parser and Unix cron would OR the two fields; Quartz refuses, and so do we, rather than guess.
    fail(null, `day-of-month "${dom}" and day-of-week "${dow}" are both specific, which Quartz does not allow: use ? in one of them`);
  }
  return compiled;
}

// ---------------------------------------------------------------------------------------------
// Day rules: which days of one month match
// ---------------------------------------------------------------------------------------------

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Quartz's nearest weekday: Saturday -> Friday, Sunday -> Monday, never leaving the month. */
function nearestWeekday(day: number, lastDay: number, firstWeekday: number): number {
  const wd = (firstWeekday + day - 1) % 7;
  if (wd === 6) return day === 1 ? 3 : day - 1;
  if (wd === 0) return day === lastDay ? day - 2 : day + 1;
  return day;
}

function domMask(r: DomRule, lastDay: number, firstWeekday: number): number {
  let mask = 0;
  for (const d of r.days) if (d <= lastDay) mask |= 1 << d;
  for (const n of r.lastOffsets) if (lastDay - n >= 1) mask |= 1 << (lastDay - n);
  // 31W in a 30-day month never fires (as in Quartz): the 31st is not moved into the month.
  for (const d of r.nearest) if (d <= lastDay) mask |= 1 << nearestWeekday(d, lastDay, firstWeekday);
  for (const n of r.lastNearest) if (lastDay - n >= 1) mask |= 1 << nearestWeekday(lastDay - n, lastDay, firstWeekday);
  return mask;
}

function dowMask(r: DowRule, lastDay: number, firstWeekday: number): number {
  let mask = 0;
  for (let d = 1; d <= lastDay; d++) if (r.weekdays.includes((firstWeekday + d - 1) % 7)) mask |= 1 << d;
  const lastWeekday = (firstWeekday + lastDay - 1) % 7;
  for (const wd of r.last) mask |= 1 << (lastDay - ((lastWeekday - wd + 7) % 7));
  for (const [wd, k] of r.nth) {
    const d = 1 + ((wd - firstWeekday + 7) % 7) + 7 * (k - 1);
    if (d <= lastDay) mask |= 1 << d;
  }
  return mask;
}

/** Bit d set = day d of the month matches the day fields (bit 0 unused). */
function dayMask(c: Compiled, year: number, month: number): number {
  const lastDay = daysInMonth(year, month);
  const all = lastDay === 31 ? -2 : ((1 << (lastDay + 1)) - 2);
  if (!c.dom && !c.dow) return all;
  const firstWeekday = new Date(Date.UTC(year, month - 1, 1)).getUTCDay();
  const d = c.dom ? domMask(c.dom, lastDay, firstWeekday) : 0;
  const w = c.dow ? dowMask(c.dow, lastDay, firstWeekday) : 0;
  if (!c.dom) return w;
  if (!c.dow) return d;
  return c.dayCombine === 'or' ? d | w : d & w;
}

/** Rejects expressions that can never fire (`30 2` = February 30th), instead of letting next() search forever. */
function assertCanFire(c: Compiled): void {
  if (!c.dom && !c.dow) return;
  // 2000-2027 holds all 14 kinds of year (7 first weekdays x leap or not), so it decides "ever" exactly.
  const years = c.years ?? Array.from({ length: 28 }, (_, i) => 2000 + i);
  for (const y of years) for (const m of c.months) if (dayMask(c, y, m) !== 0) return;
  fail(null, `no date matches the day and month fields${c.years ? ' in the years given' : ''}, so it would never fire`);
}

// ---------------------------------------------------------------------------------------------
// Time zones
// ---------------------------------------------------------------------------------------------

interface Transition {
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
type Resolved =
  | { kind: 'normal'; instant: number }
  | { kind: 'gap'; instant: number; endWall: number } // did not exist; instant = shifted forward by the gap
  | { kind: 'ambiguous'; first: number; endWall: number }; // happened twice; first occurrence

/**
 * UTC offsets of one zone, from Intl. Offsets are sampled once per day of a year (then bisected to the
 * second) and cached per year, so lookups on the hot path cost a binary search, not an Intl call (~4 µs).
 * Assumes a zone changes offset at most once within any 4 days, true of every zone since 1970.
 */
class ZoneRules {
  private readonly years = new Map<number, YearRules>();
  private last: YearRules | undefined;
  private readonly fmt: Intl.DateTimeFormat;

  constructor(timeZone: string) {
    this.fmt = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
  }

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
   * time repeated by a fall-back fires at its first occurrence. Schedule.next() adds one exception:
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
function zoneRules(timeZone: string): ZoneRules | null {
  let z = zoneCache.get(timeZone);
  if (z === undefined) {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone }).resolvedOptions().timeZone;
    z = resolved === 'UTC' || resolved === 'Etc/UTC' ? null : new ZoneRules(timeZone);
    zoneCache.set(timeZone, z);
  }
  return z;
}

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

const validZones = new Map<string, boolean>();

// ---------------------------------------------------------------------------------------------
// The schedule
// ---------------------------------------------------------------------------------------------

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
      if (y > SEARCH_YEAR_MAX) return null;
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

/** For schemas: the INVALID_CRON message for `expression` in `timeZone`, or null when it is valid. */
export function validateCron(expression: string, timeZone?: string): string | null {
  try {
    parseCron(expression, timeZone);
    return null;
  } catch (err) {
    if (err instanceof ShardcronError && err.code === ErrorCodes.INVALID_CRON) return err.message;
    throw err;
  }
}
