/**
 * The text of a cron expression: tokenizer and parser of the Quartz (6 or 7 fields) and Unix (5 fields)
 * syntax (lists, ranges, steps, names; day rules L, L-n, W, LW, nL, n#k), compiled into value sets,
 * and the day rules that say which days of one month match. Pure: no clock, no time zone; the
 * schedule that searches these tables is in cron.ts. Accepted syntax and error rules: docs/cron.md.
 */

/** The field a parse error is about, as named in error messages and `details.field`. */
export type FieldName = 'seconds' | 'minutes' | 'hours' | 'day-of-month' | 'month' | 'day-of-week' | 'year';

interface FieldSpec {
  readonly name: FieldName;
  readonly min: number;
  readonly max: number;
  readonly names?: Readonly<Record<string, number>>;
  /** Quartz lets a range run past the end (`22-2`, `FRI-MON`); Unix cron does not. */
  readonly wrap: boolean;
}

/** Quartz accepts years 1970-2199; an expression without a year field fires within them too (docs/cron.md). */
export const YEAR_MIN = 1970;
export const YEAR_MAX = 2199;
const MAX_EXPRESSION_LENGTH = 1024;
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
export class FieldError extends Error {
  constructor(readonly field: FieldName | null, message: string) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing: text -> value sets and day rules
// ---------------------------------------------------------------------------------------------

/** Day-of-month part of a day rule; days are 1-31, offsets count back from the month's last day. */
export interface DomRule {
  days: number[];
  lastOffsets: number[]; // L (0), L-3 (3)
  nearest: number[]; // 15W
  lastNearest: number[]; // LW (0), L-3W (3)
}
/** Day-of-week part; weekdays are JS numbers (0 = Sunday), whatever the expression's numbering. */
export interface DowRule {
  weekdays: number[];
  last: number[]; // 6L in Quartz = last Friday -> 5
  nth: Array<readonly [weekday: number, k: number]>; // 6#3 in Quartz = third Friday -> [5, 3]
}

/** A compiled expression: the allowed values of each field, sorted, and the day rules. */
export interface Compiled {
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

/**
 * Parses the fields of `expression` (5, 6 or 7) into a {@link Compiled} table.
 * @throws FieldError naming the field at fault (null for the expression as a whole).
 */
export function compile(expression: string): Compiled {
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
export function dayMask(c: Compiled, year: number, month: number): number {
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
export function assertCanFire(c: Compiled): void {
  if (!c.dom && !c.dow) return;
  // 2000-2027 holds all 14 kinds of year (7 first weekdays x leap or not), so it decides "ever" exactly.
  const years = c.years ?? Array.from({ length: 28 }, (_, i) => 2000 + i);
  for (const y of years) for (const m of c.months) if (dayMask(c, y, m) !== 0) return;
  fail(null, `no date matches the day and month fields${c.years ? ' in the years given' : ''}, so it would never fire`);
}
