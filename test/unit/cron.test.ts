import { CronExpressionParser } from 'cron-parser';
import { ErrorCodes, ShardcronError } from '../../src/shared/errors';
import { isValidTimeZone, parseCron, validateCron } from '../../src/shared/cron/cron';

const at = (iso: string): number => Date.parse(iso);
const iso = (t: number): string => new Date(t).toISOString().replace('.000Z', 'Z');

/** The first `n` fire times after `fromIso`, as ISO strings. */
function fires(expression: string, fromIso: string, n: number, timeZone = 'UTC'): string[] {
  const s = parseCron(expression, timeZone);
  const out: string[] = [];
  let t: number | null = at(fromIso);
  while (out.length < n && (t = s.next(t)) !== null) out.push(iso(t));
  return out;
}

/** Local calendar date and time of `t` in `timeZone`, e.g. "2026-03-29 03:30". */
function local(t: number, timeZone: string): string {
  const p = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' })
      .formatToParts(t)
      .map((x) => [x.type, x.value]),
  );
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`;
}

const WEEKDAY = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

/** Weekdays (UTC) on which `expression` fires during four weeks of January 2026. */
function weekdaysOf(expression: string): string[] {
  const s = parseCron(expression);
  const days = new Set(s.between(at('2026-01-01T00:00:00Z'), at('2026-01-29T00:00:00Z'), 1000).map((t) => new Date(t).getUTCDay()));
  return [...days].sort().map((d) => WEEKDAY[d] as string);
}

function cronError(expression: string, timeZone?: string): ShardcronError {
  try {
    parseCron(expression, timeZone);
  } catch (err) {
    if (err instanceof ShardcronError) return err;
    throw err;
  }
  throw new Error(`expected "${expression}" to be rejected`);
}

// The module must not read the clock: pin it far away so that any use of "now" would show.
beforeAll(() => jest.useFakeTimers({ now: new Date('2031-07-01T00:00:00Z') }));
afterAll(() => jest.useRealTimers());

describe('Quartz syntax (6 or 7 fields, seconds first)', () => {
  it('fires a daily expression at the given time and keeps the expression and zone', () => {
    const s = parseCron('0 15 10 ? * *');
    expect(s.expression).toBe('0 15 10 ? * *');
    expect(s.timeZone).toBe('UTC');
    expect(fires('0 15 10 ? * *', '2026-01-01T00:00:00Z', 2)).toEqual(['2026-01-01T10:15:00Z', '2026-01-02T10:15:00Z']);
  });

  it('handles seconds, steps, ranges, lists and Quartz wrap-around ranges', () => {
    expect(fires('0/15 * * * * ?', '2026-01-01T00:00:00Z', 4)).toEqual([
      '2026-01-01T00:00:15Z', '2026-01-01T00:00:30Z', '2026-01-01T00:00:45Z', '2026-01-01T00:01:00Z',
    ]);
    expect(fires('5/20 0 0 * * ?', '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-01T00:00:05Z', '2026-01-01T00:00:25Z', '2026-01-01T00:00:45Z']);
    expect(fires('0 0 8-9,14 * * ?', '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-01T08:00:00Z', '2026-01-01T09:00:00Z', '2026-01-01T14:00:00Z']);
    expect(fires('0 0 22-1/1 * * ?', '2026-01-01T12:00:00Z', 4)).toEqual([
      '2026-01-01T22:00:00Z', '2026-01-01T23:00:00Z', '2026-01-02T00:00:00Z', '2026-01-02T01:00:00Z',
    ]);
    expect(fires('0 0 0 1 NOV-FEB ?', '2026-01-15T00:00:00Z', 4)).toEqual([
      '2026-02-01T00:00:00Z', '2026-11-01T00:00:00Z', '2026-12-01T00:00:00Z', '2027-01-01T00:00:00Z',
    ]);
  });

  it('accepts month and day names in any case', () => {
    expect(fires('0 0 12 ? jan,Mar mon', '2026-01-01T00:00:00Z', 2)).toEqual(['2026-01-05T12:00:00Z', '2026-01-12T12:00:00Z']);
  });

  it('accepts * in both day fields and ? in either', () => {
    for (const e of ['0 0 6 * * *', '0 0 6 ? * *', '0 0 6 * * ?']) {
      expect(fires(e, '2026-01-01T00:00:00Z', 2)).toEqual(['2026-01-01T06:00:00Z', '2026-01-02T06:00:00Z']);
    }
  });

  it.each([
    ['1', ['SUN']],
    ['7', ['SAT']],
    ['L', ['SAT']],
    ['2-6', ['MON', 'TUE', 'WED', 'THU', 'FRI']],
    ['MON-FRI', ['MON', 'TUE', 'WED', 'THU', 'FRI']],
    ['1,7', ['SUN', 'SAT']],
    ['*/2', ['SUN', 'TUE', 'THU', 'SAT']],
    ['2/3', ['MON', 'THU']],
    ['6-2', ['SUN', 'MON', 'FRI', 'SAT']],
    ['FRI-MON', ['SUN', 'MON', 'FRI', 'SAT']],
    ['1-7', ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT']],
  ])('numbers day-of-week %s the Quartz way (1 = SUN)', (dow, expected) => {
    expect(weekdaysOf(`0 0 12 ? * ${dow}`)).toEqual(expected);
  });

  it('supports nL (last weekday of the month) and n#k (k-th weekday), also in lists', () => {
    expect(fires('0 0 12 ? * 6L', '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-30T12:00:00Z', '2026-02-27T12:00:00Z', '2026-03-27T12:00:00Z']);
    expect(fires('0 0 12 ? * FRIL', '2026-07-01T00:00:00Z', 2)).toEqual(['2026-07-31T12:00:00Z', '2026-08-28T12:00:00Z']);
    expect(fires('0 0 12 ? * 6#3', '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-16T12:00:00Z', '2026-02-20T12:00:00Z', '2026-03-20T12:00:00Z']);
    // Fifth Monday: only months that have one (March, June, August, November 2026).
    expect(fires('0 0 12 ? * MON#5', '2026-01-01T00:00:00Z', 4)).toEqual([
      '2026-03-30T12:00:00Z', '2026-06-29T12:00:00Z', '2026-08-31T12:00:00Z', '2026-11-30T12:00:00Z',
    ]);
    expect(fires('0 0 12 ? * 2#1,6L', '2026-01-01T00:00:00Z', 4)).toEqual([
      '2026-01-05T12:00:00Z', '2026-01-30T12:00:00Z', '2026-02-02T12:00:00Z', '2026-02-27T12:00:00Z',
    ]);
  });

  it('supports L, L-n, nW, LW and L-nW in day-of-month (checked against the 2026 calendar)', () => {
    const days = (dom: string, n: number): string[] => fires(`0 0 12 ${dom} * ?`, '2026-01-01T00:00:00Z', n).map((t) => t.slice(0, 10));
    expect(days('L', 3)).toEqual(['2026-01-31', '2026-02-28', '2026-03-31']);
    expect(fires('0 0 12 L 2 ?', '2027-03-01T00:00:00Z', 1)).toEqual(['2028-02-29T12:00:00Z']);
    expect(days('L-3', 3)).toEqual(['2026-01-28', '2026-02-25', '2026-03-28']);
    // 15th of Feb 2026 is a Sunday -> Monday 16th; 15th of Aug is a Saturday -> Friday 14th.
    expect(days('15W', 8)).toEqual(['2026-01-15', '2026-02-16', '2026-03-16', '2026-04-15', '2026-05-15', '2026-06-15', '2026-07-15', '2026-08-14']);
    // 1W never leaves the month: Sunday 1 Feb -> Monday 2nd; Saturday 1 Aug -> Monday 3rd.
    expect(fires('0 0 12 1W * ?', '2026-01-02T00:00:00Z', 7).map((t) => t.slice(0, 10))).toEqual([
      '2026-02-02', '2026-03-02', '2026-04-01', '2026-05-01', '2026-06-01', '2026-07-01', '2026-08-03',
    ]);
    // Last weekday: Sat 31 Jan -> 30th, Sat 28 Feb -> 27th, Sun 31 May -> Fri 29th.
    expect(days('LW', 5)).toEqual(['2026-01-30', '2026-02-27', '2026-03-31', '2026-04-30', '2026-05-29']);
    // 31W fires only in months with a 31st, moved to a weekday.
    expect(days('31W', 4)).toEqual(['2026-01-30', '2026-03-31', '2026-05-29', '2026-07-31']);
    expect(days('L-2W', 2)).toEqual(['2026-01-29', '2026-02-26']);
    expect(days('1,L', 4)).toEqual(['2026-01-01', '2026-01-31', '2026-02-01', '2026-02-28']);
  });

  it('supports a year field: single years, ranges, lists and steps', () => {
    expect(fires('0 0 0 1 1 ? 2027-2028', '2026-01-01T00:00:00Z', 3)).toEqual(['2027-01-01T00:00:00Z', '2028-01-01T00:00:00Z']);
    expect(fires('0 0 0 1 1 ? 2026,2030', '2026-06-01T00:00:00Z', 2)).toEqual(['2030-01-01T00:00:00Z']);
    expect(fires('0 0 0 29 2 ? 2026/2', '2026-01-01T00:00:00Z', 2)).toEqual(['2028-02-29T00:00:00Z', '2032-02-29T00:00:00Z']);
    expect(fires('0 0 0 1 1 ? *', '2026-06-01T00:00:00Z', 1)).toEqual(['2027-01-01T00:00:00Z']);
  });

  it('returns null, without searching forever, once the year field lies in the past', () => {
    const s = parseCron('0 0 0 1 1 ? 2020');
    expect(s.next(at('2026-01-01T00:00:00Z'))).toBeNull();
    expect(s.next(at('2019-06-01T00:00:00Z'))).toBe(at('2020-01-01T00:00:00Z'));
    expect(parseCron('0 0 0 31 12 ? 2199').next(at('2199-12-31T00:00:00Z'))).toBeNull();
  });
});

describe('Unix syntax (5 fields)', () => {
  it('has minute precision', () => {
    expect(fires('*/15 * * * *', '2026-01-01T00:00:00Z', 3)).toEqual(['2026-01-01T00:15:00Z', '2026-01-01T00:30:00Z', '2026-01-01T00:45:00Z']);
  });

  it.each([
    ['0', ['SUN']],
    ['7', ['SUN']],
    ['1-5', ['MON', 'TUE', 'WED', 'THU', 'FRI']],
    ['0,6', ['SUN', 'SAT']],
    ['5-7', ['SUN', 'FRI', 'SAT']],
    ['*/2', ['SUN', 'TUE', 'THU', 'SAT']],
    ['SAT', ['SAT']],
  ])('numbers day-of-week %s the Unix way (0 and 7 = SUN)', (dow, expected) => {
    expect(weekdaysOf(`0 12 * * ${dow}`)).toEqual(expected);
  });

  it('fires when either day field matches if both are restricted, as Unix cron does', () => {
    // The 13th, or any Friday: 2 Jan (Fri), 9 Jan (Fri), 13 Jan (Tue), 16 Jan (Fri).
    expect(fires('0 0 13 * 5', '2026-01-01T00:00:00Z', 4).map((t) => t.slice(0, 10))).toEqual(['2026-01-02', '2026-01-09', '2026-01-13', '2026-01-16']);
  });
});

describe('next() and between()', () => {
  it('returns the first fire strictly after the given instant, ignoring milliseconds', () => {
    const s = parseCron('0 0 * * * ?');
    expect(s.next(at('2026-01-01T05:00:00Z'))).toBe(at('2026-01-01T06:00:00Z'));
    expect(s.next(at('2026-01-01T04:59:59.999Z'))).toBe(at('2026-01-01T05:00:00Z'));
    expect(s.next(at('2026-01-01T05:00:00Z') + 0.5)).toBe(at('2026-01-01T06:00:00Z'));
    expect(() => s.next(Number.NaN)).toThrow(RangeError);
  });

  it('answers times in any order as a schedule parsed afresh does (the memo of its last answer), across DST changes', () => {
    for (const [cron, zone, from] of [
      ['0 30 * * * ?', 'Europe/Berlin', '2026-10-25T00:00:00Z'],
      ['*/20 * * * * ?', 'America/New_York', '2026-03-08T06:00:00Z'],
      ['0 0 2 * * ?', 'Europe/Berlin', '2026-03-28T00:00:00Z'],
    ] as const) {
      const memo = parseCron(cron, zone);
      let seed = 11;
      const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
      for (let i = 0; i < 300; i += 1) {
        const t = at(from) + Math.floor(random() * 3 * 86_400_000);
        expect(memo.next(t)).toBe(parseCron(cron, zone).next(t));
      }
    }
  });

  it('lists fires in (from, to], earliest first, at most limit of them', () => {
    const s = parseCron('0 0 * * * ?');
    const from = at('2026-01-01T00:00:00Z');
    expect(s.between(from, at('2026-01-01T03:00:00Z'), 10).map(iso)).toEqual(['2026-01-01T01:00:00Z', '2026-01-01T02:00:00Z', '2026-01-01T03:00:00Z']);
    expect(s.between(from, at('2026-01-02T00:00:00Z'), 2).map(iso)).toEqual(['2026-01-01T01:00:00Z', '2026-01-01T02:00:00Z']);
    expect(s.between(from, from + 1000, 10)).toEqual([]);
    expect(s.between(from, from - 1, 10)).toEqual([]);
    expect(s.between(from, at('2026-01-02T00:00:00Z'), 0)).toEqual([]);
    expect(parseCron('0 0 0 1 1 ? 2020').between(from, at('2030-01-01T00:00:00Z'), 10)).toEqual([]);
  });
});

describe('year bounds (docs/cron.md: 1970-2199, an omitted year is `*` over the same range)', () => {
  it('answers the first fire in 1970 for an instant before 1970', () => {
    expect(fires('0 0 0 * * ?', '1900-06-01T00:00:00Z', 2)).toEqual(['1970-01-01T00:00:00Z', '1970-01-02T00:00:00Z']);
    expect(fires('0 0 12 ? * MON', '1969-12-31T00:00:00Z', 1)).toEqual(['1970-01-05T12:00:00Z']);
    expect(fires('0 0 * * *', '1800-01-01T00:00:00Z', 1)).toEqual(['1970-01-01T00:00:00Z']);
    expect(fires('0 0 0 1 1 ? *', '1950-01-01T00:00:00Z', 1)).toEqual(['1970-01-01T00:00:00Z']);
  });

  it('fires on local 1970 times in a zone ahead of UTC, where they fall in 1969 UTC', () => {
    expect(fires('0 0 0 * * ?', '1960-01-01T00:00:00Z', 1, 'Asia/Tokyo')).toEqual(['1969-12-31T15:00:00Z']);
  });

  it('stops after the last fire in 2199, with or without a year field', () => {
    expect(fires('0 0 0 1 1 ?', '2198-06-01T00:00:00Z', 5)).toEqual(['2199-01-01T00:00:00Z']);
    expect(fires('0 0 0 1 1 ? *', '2198-06-01T00:00:00Z', 5)).toEqual(['2199-01-01T00:00:00Z']);
    expect(fires('59 59 23 31 12 ?', '2199-12-31T23:59:58Z', 3)).toEqual(['2199-12-31T23:59:59Z']);
    expect(parseCron('* * * * * ?').next(at('2199-12-31T23:59:59Z'))).toBeNull();
    expect(parseCron('0 0 * * *').next(at('2200-01-01T00:00:00Z'))).toBeNull();
    expect(parseCron('0 0 * * * ?').between(at('2199-12-31T22:00:00Z'), at('2201-01-01T00:00:00Z'), 10).map(iso)).toEqual(['2199-12-31T23:00:00Z']);
  });

  it('refuses years outside 1970-2199 in the year field', () => {
    expect(cronError('0 0 0 1 1 ? 1969').code).toBe(ErrorCodes.INVALID_CRON);
    expect(cronError('0 0 0 1 1 ? 2200').code).toBe(ErrorCodes.INVALID_CRON);
  });
});

describe('rejected expressions', () => {
  it.each([
    ['0 0 12 1 * MON', undefined, 'use ? in one of them'],
    ['0 0 12 1-5 * 2#1', undefined, 'use ? in one of them'],
    ['0 0 0 ? * 0', 'day-of-week', '1-7 with 1 = SUN'],
    ['0 0 0 ? * 8', 'day-of-week', 'out of range 1-7'],
    ['60 * * * * ?', 'seconds', 'out of range 0-59'],
    ['0 60 * * * ?', 'minutes', 'out of range 0-59'],
    ['0 0 24 * * ?', 'hours', 'out of range 0-23'],
    ['0 0 0 32 * ?', 'day-of-month', 'out of range 1-31'],
    ['0 0 0 0 * ?', 'day-of-month', 'out of range 1-31'],
    ['0 0 0 1 13 ?', 'month', 'out of range 1-12'],
    ['0 0 0 1 FOO ?', 'month', '"FOO" is not a number or a name'],
    ['0 0 0 ? * MON-FOO', 'day-of-week', '"FOO" is not a number or a name'],
    ['0 0 MON * * ?', 'hours', '"MON" is not a number'],
    ['0 0 0 1 1 ? 1969', 'year', 'out of range 1970-2199'],
    ['0 0 0 1 1 ? 2030-2026', 'year', 'runs backwards'],
    ['0 */0 * * * ?', 'minutes', 'step 0 must be between 1 and 60'],
    ['0 */61 * * * ?', 'minutes', 'step 61'],
    ['0 *-5 * * * ?', 'minutes', '"*" cannot start a range'],
    ['0 1,,2 * * * ?', 'minutes', 'empty list item'],
    ['0 0 ? * * *', 'hours', '? is only allowed in day-of-month or day-of-week'],
    ['0 0 0 ?,1 * *', 'day-of-month', '? must stand alone'],
    ['0 H * * * ?', 'minutes', 'cannot read "H"'],
    ['0 0 L * * ?', 'hours', 'cannot read "L"'],
    ['0 0 0 ? * 5W', 'day-of-week', 'cannot read "5W"'],
    ['0 0 0 5L * ?', 'day-of-month', 'cannot read "5L"'],
    ['0 0 0 ? * 2-6L', 'day-of-week', 'cannot read "2-6L"'],
    ['0 0 0 ? * L,2', 'day-of-week', 'cannot read "L"'],
    ['0 0 0 ? * 6#6', 'day-of-week', 'must be 1-5'],
    ['0 0 0 L-31 * ?', 'day-of-month', 'at most 30'],
    ['0 0 0 32W * ?', 'day-of-month', 'out of range 1-31'],
    ['0 22-2 * * *', 'hours', 'runs backwards'],
    ['0 0 * * L', 'day-of-week', 'lone L'],
    ['0 0 0 30 2 ?', undefined, 'would never fire'],
    ['0 0 0 31 4,6,9,11 ?', undefined, 'would never fire'],
    ['0 0 0 29 2 ? 2027', undefined, 'in the years given, so it would never fire'],
    ['@daily', undefined, 'macros such as @daily are not supported'],
    ['', undefined, 'got 0'],
    ['* * * *', undefined, 'got 4'],
    ['0 0 0 * * ? 2026 x', undefined, 'got 8'],
  ])('%s', (expression, field, message) => {
    const err = cronError(expression);
    expect(err.code).toBe(ErrorCodes.INVALID_CRON);
    expect(err.message).toContain(`Invalid cron expression "${expression}"`);
    expect(err.message).toContain(message);
    expect(err.details.expression).toBe(expression);
    expect(err.details.field).toBe(field);
    if (field) expect(err.message).toContain(`${field} field`);
  });

  it('names timeZone when the zone is not an IANA name', () => {
    const err = cronError('0 0 0 * * ?', '+02:00');
    expect(err.code).toBe(ErrorCodes.INVALID_CRON);
    expect(err.details.field).toBe('timeZone');
    expect(err.message).toContain('Invalid timeZone "+02:00" for cron expression "0 0 0 * * ?"');
  });

  it('rejects a non-string expression', () => {
    expect(cronError(42 as unknown as string).code).toBe(ErrorCodes.INVALID_CRON);
  });
});

describe('validateCron and isValidTimeZone', () => {
  it('validateCron returns null or the INVALID_CRON message', () => {
    expect(validateCron('0/5 * * * * ?', 'Europe/Berlin')).toBeNull();
    expect(validateCron('0 0 12 1 * MON')).toBe(cronError('0 0 12 1 * MON').message);
    expect(validateCron('0 0 0 * * ?', 'Mars/Olympus')).toContain('Invalid timeZone "Mars/Olympus"');
  });

  it.each(['UTC', 'Etc/UTC', 'GMT', 'Europe/Berlin', 'America/New_York', 'America/Argentina/Buenos_Aires', 'Etc/GMT-2', 'europe/berlin'])(
    'accepts %s',
    (tz) => expect(isValidTimeZone(tz)).toBe(true),
  );

  it.each(['+02:00', '-0500', 'UTC+2', 'GMT-5', 'utc+02:00', 'Mars/Olympus', '', ' Europe/Berlin', 'Europe/Berlin\n', '../etc/passwd'])(
    'rejects %j',
    (tz) => expect(isValidTimeZone(tz)).toBe(false),
  );
});

describe('daylight saving time', () => {
  /** All fires of `expression` in `timeZone` over [fromIso, toIso), as ISO strings. */
  const window = (expression: string, timeZone: string, fromIso: string, toIso: string): string[] =>
    parseCron(expression, timeZone).between(at(fromIso) - 1, at(toIso) - 1, 10_000).map(iso);

  /** Asserts exactly one fire per local calendar day. */
  const oncePerLocalDay = (times: string[], timeZone: string): void => {
    const days = times.map((t) => local(at(t), timeZone).slice(0, 10));
    expect(new Set(days).size).toBe(days.length);
  };

  it('Europe/Berlin spring-forward (2026-03-29): 02:30 does not exist and fires at 03:30 CEST', () => {
    const times = window('0 30 2 * * ?', 'Europe/Berlin', '2026-03-26T00:00:00Z', '2026-04-02T00:00:00Z');
    expect(times).toEqual([
      '2026-03-26T01:30:00Z', // 02:30 CET
      '2026-03-27T01:30:00Z',
      '2026-03-28T01:30:00Z',
      '2026-03-29T01:30:00Z', // 03:30 CEST: the skipped 02:30, shifted by the one-hour gap
      '2026-03-30T00:30:00Z', // 02:30 CEST
      '2026-03-31T00:30:00Z',
      '2026-04-01T00:30:00Z',
    ]);
    oncePerLocalDay(times, 'Europe/Berlin');
    expect(local(at('2026-03-29T01:30:00Z'), 'Europe/Berlin')).toBe('2026-03-29 03:30');
  });

  it('Europe/Berlin fall-back (2026-10-25): 02:30 happens twice and fires once, at the first occurrence', () => {
    const times = window('0 30 2 * * ?', 'Europe/Berlin', '2026-10-22T00:00:00Z', '2026-10-29T00:00:00Z');
    expect(times).toEqual([
      '2026-10-22T00:30:00Z', // 02:30 CEST
      '2026-10-23T00:30:00Z',
      '2026-10-24T00:30:00Z',
      '2026-10-25T00:30:00Z', // 02:30 CEST; 02:30 CET (01:30Z) does not fire
      '2026-10-26T01:30:00Z', // 02:30 CET
      '2026-10-27T01:30:00Z',
      '2026-10-28T01:30:00Z',
    ]);
    oncePerLocalDay(times, 'Europe/Berlin');
  });

  it('America/New_York spring-forward (2026-03-08): 02:30 fires at 03:30 EDT', () => {
    const times = window('0 30 2 * * ?', 'America/New_York', '2026-03-05T00:00:00Z', '2026-03-12T00:00:00Z');
    expect(times).toEqual([
      '2026-03-05T07:30:00Z', // 02:30 EST
      '2026-03-06T07:30:00Z',
      '2026-03-07T07:30:00Z',
      '2026-03-08T07:30:00Z', // 03:30 EDT
      '2026-03-09T06:30:00Z', // 02:30 EDT
      '2026-03-10T06:30:00Z',
      '2026-03-11T06:30:00Z',
    ]);
    oncePerLocalDay(times, 'America/New_York');
  });

  it('America/New_York fall-back (2026-11-01): 02:30 is unaffected, the repeated 01:30 fires once', () => {
    const daily0230 = window('0 30 2 * * ?', 'America/New_York', '2026-10-29T00:00:00Z', '2026-11-05T00:00:00Z');
    expect(daily0230).toEqual([
      '2026-10-29T06:30:00Z', // 02:30 EDT
      '2026-10-30T06:30:00Z',
      '2026-10-31T06:30:00Z',
      '2026-11-01T07:30:00Z', // 02:30 EST: New York repeats 01:00-01:59, not 02:xx
      '2026-11-02T07:30:00Z',
      '2026-11-03T07:30:00Z',
      '2026-11-04T07:30:00Z',
    ]);
    oncePerLocalDay(daily0230, 'America/New_York');
    const daily0130 = window('0 30 1 * * ?', 'America/New_York', '2026-10-29T00:00:00Z', '2026-11-05T00:00:00Z');
    expect(daily0130).toEqual([
      '2026-10-29T05:30:00Z',
      '2026-10-30T05:30:00Z',
      '2026-10-31T05:30:00Z',
      '2026-11-01T05:30:00Z', // 01:30 EDT, the first occurrence; 01:30 EST (06:30Z) does not fire
      '2026-11-02T06:30:00Z',
      '2026-11-03T06:30:00Z',
      '2026-11-04T06:30:00Z',
    ]);
    oncePerLocalDay(daily0130, 'America/New_York');
  });

  it.each([
    ['Europe/Berlin', '2026-03-28T22:00:00Z', '2026-03-29T04:00:00Z', '2026-03-29 02:'],
    ['Europe/Berlin', '2026-10-24T22:00:00Z', '2026-10-25T04:00:00Z', null],
    ['America/New_York', '2026-03-08T04:00:00Z', '2026-03-08T10:00:00Z', '2026-03-08 02:'],
    ['America/New_York', '2026-11-01T03:00:00Z', '2026-11-01T09:00:00Z', null],
  ])('hourly and every-10-minute jobs in %s keep a steady rhythm across %s', (tz, fromIso, toIso, missingLocalHour) => {
    for (const [expression, stepMs] of [['0 0 * * * ?', 3_600_000], ['0 0/10 * * * ?', 600_000], ['*/10 * * * *', 600_000]] as const) {
      const times = window(expression, tz, fromIso, toIso).map(at);
      // Every step of real time, from the first to the last instant of the window: no duplicate, no hole.
      const expected = Array.from({ length: (at(toIso) - at(fromIso)) / stepMs }, (_, i) => at(fromIso) + i * stepMs);
      expect(times).toEqual(expected);
      const wall = times.map((t) => local(t, tz));
      if (missingLocalHour) {
        // Spring-forward: the only local times missing are those of the hour that does not exist.
        expect(wall.filter((w) => w.startsWith(missingLocalHour))).toEqual([]);
        expect(times.length).toBe(6 * (3_600_000 / stepMs));
      } else {
        // Fall-back: the repeated local hour fires in both passes (distinct instants), so its local times show twice.
        expect(new Set(wall).size).toBe(wall.length - 3_600_000 / stepMs);
      }
    }
  });

  it('fires the repeated hour only once for expressions pinned to specific hours', () => {
    expect(window('0 0/30 2 * * ?', 'Europe/Berlin', '2026-10-24T12:00:00Z', '2026-10-25T12:00:00Z')).toEqual([
      '2026-10-25T00:00:00Z', // 02:00 CEST
      '2026-10-25T00:30:00Z', // 02:30 CEST; 02:00 and 02:30 CET do not fire
    ]);
    expect(window('0 0/30 2 * * ?', 'Europe/Berlin', '2026-03-28T12:00:00Z', '2026-03-29T12:00:00Z')).toEqual([
      '2026-03-29T01:00:00Z', // 02:00 -> 03:00 CEST
      '2026-03-29T01:30:00Z', // 02:30 -> 03:30 CEST
    ]);
    // A skipped time and a real time that land on the same instant fire once.
    expect(window('0 30 2,3 * * ?', 'Europe/Berlin', '2026-03-28T12:00:00Z', '2026-03-29T12:00:00Z')).toEqual(['2026-03-29T01:30:00Z']);
  });

  it('answers correctly when asked from inside a transition', () => {
    const daily = parseCron('0 30 2 * * ?', 'Europe/Berlin');
    // 03:10 CEST on spring-forward day: the shifted 02:30 (03:30 CEST) is still ahead.
    expect(iso(daily.next(at('2026-03-29T01:10:00Z')) as number)).toBe('2026-03-29T01:30:00Z');
    // 02:10 CET, the second pass on fall-back day: today's 02:30 already fired at 02:30 CEST.
    expect(iso(daily.next(at('2026-10-25T01:10:00Z')) as number)).toBe('2026-10-26T01:30:00Z');
    const hourly = parseCron('0 0 * * * ?', 'Europe/Berlin');
    expect(iso(hourly.next(at('2026-10-25T00:00:00Z')) as number)).toBe('2026-10-25T01:00:00Z'); // 02:00 CEST -> 02:00 CET
    expect(iso(hourly.next(at('2026-10-25T01:00:00Z')) as number)).toBe('2026-10-25T02:00:00Z'); // 02:00 CET -> 03:00 CET
    const everySecond = parseCron('* * * * * ?', 'Europe/Berlin');
    expect(everySecond.between(at('2026-03-29T00:59:58Z'), at('2026-03-29T01:00:01Z'), 10).map(iso)).toEqual([
      '2026-03-29T00:59:59Z', '2026-03-29T01:00:00Z', '2026-03-29T01:00:01Z',
    ]);
    expect(everySecond.between(at('2026-10-25T00:59:58Z'), at('2026-10-25T01:00:01Z'), 10).map(iso)).toEqual([
      '2026-10-25T00:59:59Z', '2026-10-25T01:00:00Z', '2026-10-25T01:00:01Z',
    ]);
  });

  it('handles half-hour transitions (Australia/Lord_Howe) and a skipped midnight (America/Santiago)', () => {
    // Lord Howe: 2026-10-04 02:00 +10:30 -> 02:30 +11; 2026-04-05 02:00 +11 -> 01:30 +10:30.
    expect(window('0 15 2 * * ?', 'Australia/Lord_Howe', '2026-10-02T12:00:00Z', '2026-10-04T12:00:00Z')).toEqual([
      '2026-10-02T15:45:00Z', // 02:15 +10:30
      '2026-10-03T15:45:00Z', // 02:15 does not exist -> 02:45 +11
    ]);
    expect(window('0 45 1 * * ?', 'Australia/Lord_Howe', '2026-04-03T12:00:00Z', '2026-04-05T12:00:00Z')).toEqual([
      '2026-04-03T14:45:00Z', // 01:45 +11
      '2026-04-04T14:45:00Z', // 01:45 +11, first of two; 01:45 +10:30 (15:15Z) does not fire
    ]);
    // Santiago: 2026-09-06 00:00 -04 -> 01:00 -03, so that day has no midnight.
    expect(window('0 0 0 * * ?', 'America/Santiago', '2026-09-05T00:00:00Z', '2026-09-08T00:00:00Z')).toEqual([
      '2026-09-05T04:00:00Z', // 00:00 -04
      '2026-09-06T04:00:00Z', // 01:00 -03, the shifted midnight
      '2026-09-07T03:00:00Z', // 00:00 -03
    ]);
  });
});

describe('agrees with cron-parser where both define the same schedule', () => {
  /** Our expression, then cron-parser's spelling of the same schedule (Unix weekday numbers). */
  const pairs: Array<[string, string]> = [
    ['0 */7 3-20/3 * * ?', '0 */7 3-20/3 * * *'],
    ['15,45 0/10 * * * ?', '15,45 0/10 * * * *'],
    ['0 0 12 ? * 2-6', '0 0 12 * * 1-5'],
    ['0 30 6 ? * SUN,SAT', '0 30 6 * * 0,6'],
    ['0 0 9 ? JAN-MAR 1', '0 0 9 * 1-3 0'],
    ['0 15 10 L * ?', '0 15 10 L * *'],
    ['0 15 10 ? * 6L', '0 15 10 * * 5L'],
    ['0 15 10 ? * 6#3', '0 15 10 * * 5#3'],
    ['0 0 0 1,15 */2 ?', '0 0 0 1,15 */2 *'],
    ['*/15 9-17 * * 1-5', '*/15 9-17 * * 1-5'],
    ['0 0 1,15 * 1', '0 0 1,15 * 1'],
    ['30 4 * * 7', '30 4 * * 7'],
    ['0 0 L * *', '0 0 L * *'],
  ];

  it.each(pairs)('%s in UTC', (ours, theirs) => {
    const from = at('2026-01-01T00:00:00Z');
    const reference = CronExpressionParser.parse(theirs, { tz: 'UTC', currentDate: new Date(from) }).take(150).map((d) => d.getTime());
    expect(parseCron(ours).between(from, Number.MAX_SAFE_INTEGER, 150)).toEqual(reference);
  });

  /** cron-parser is slow (tens of µs a call), so sub-daily schedules are compared around the transitions only. */
  const transitions: Record<string, Array<[string, string]>> = {
    'Europe/Berlin': [['2026-03-27T00:00:00Z', '2026-03-31T00:00:00Z'], ['2026-10-23T00:00:00Z', '2026-10-27T00:00:00Z']],
    'America/New_York': [['2026-03-06T00:00:00Z', '2026-03-10T00:00:00Z'], ['2026-10-30T00:00:00Z', '2026-11-03T00:00:00Z']],
  };
  const wholeYear: Array<[string, string]> = [['2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z']];

  it.each([
    ['0 30 2 * * ?', '0 30 2 * * *', true],
    ['0 0 9 ? * 2-6', '0 0 9 * * 1-5', true],
    ['0 0 * * * ?', '0 0 * * * *', false],
    ['0 */20 * * * ?', '0 */20 * * * *', false],
    ['0 15,45 1-3 * * ?', '0 15,45 1-3 * * *', false],
  ])('%s in Europe/Berlin and America/New_York, DST transitions included', (ours, theirs, yearLong) => {
    for (const tz of Object.keys(transitions)) {
      for (const [fromIso, toIso] of yearLong ? wholeYear : (transitions[tz] as Array<[string, string]>)) {
        const [from, to] = [at(fromIso), at(toIso)];
        const reference: number[] = [];
        const it = CronExpressionParser.parse(theirs, { tz, currentDate: new Date(from) });
        for (let t = it.next().getTime(); t <= to; t = it.next().getTime()) reference.push(t);
        expect(parseCron(ours, tz).between(from, to, 100_000)).toEqual(reference);
      }
    }
  });
});
