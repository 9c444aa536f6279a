import { parseCron } from '../../src/shared/cron/cron';
import { FireTimer, type DueJob } from '../../src/leader/fire-timer';
import { FakeClock } from '../helpers/fake-clock';

/**
 * The fire timer fed real cron schedules through DST changes, on a hand-driven clock. What the
 * leader is handed must follow docs/cron.md "Daylight saving time": a daily 02:30 fires once on every
 * local day (the skipped one at 03:30, the repeated one at its first occurrence), and an interval job
 * keeps its interval in real time, with no fire delivered twice.
 */

interface Delivery {
  now: number;
  due: DueJob[];
}

const HOUR = 3_600_000;
const at = (iso: string): number => Date.parse(iso);
const iso = (t: number): string => new Date(t).toISOString().replace('.000Z', 'Z');

/** Local date and time of `t` in `timeZone` with its offset, e.g. "2026-10-25 02:30 GMT+2". */
function local(t: number, timeZone: string): string {
  const p = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
    })
      .formatToParts(t)
      .map((x) => [x.type, x.value]),
  );
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute} ${p.timeZoneName}`;
}

/**
 * Runs one job with `expression` in `timeZone` on a FireTimer (default 1 s sleep cap, so it also
 * wakes early thousands of times) from `fromIso` to `toIso`, and returns every onDue call.
 */
function simulate(expression: string, timeZone: string, fromIso: string, toIso: string): Delivery[] {
  const clock = new FakeClock(at(fromIso));
  const deliveries: Delivery[] = [];
  const timer = new FireTimer({ clock, onDue: (due, now) => void deliveries.push({ now, due }) });
  try {
    timer.schedule('job', parseCron(expression, timeZone));
    timer.start();
    clock.advanceTo(at(toIso));
  } finally {
    timer.close();
  }
  return deliveries;
}

/** The fire times delivered, after checking each came alone, on time and exactly once. */
function fireTimesOf(deliveries: Delivery[]): number[] {
  for (const { now, due } of deliveries) {
    expect(due).toEqual([{ job: 'job', fireTimes: [now], truncated: false }]);
  }
  const times = deliveries.map((d) => d.now);
  for (let i = 1; i < times.length; i += 1) expect(times[i]).toBeGreaterThan(times[i - 1]);
  return times;
}

describe('a daily 02:30 job across DST, delivered by the fire timer', () => {
  it.each([
    {
      change: 'Berlin spring-forward (2026-03-29, 02:00 CET -> 03:00 CEST)',
      expression: '0 30 2 * * ?', timeZone: 'Europe/Berlin', from: '2026-03-25T12:00:00Z', to: '2026-04-01T12:00:00Z',
      expected: [
        ['2026-03-26T01:30:00Z', '2026-03-26 02:30 GMT+1'],
        ['2026-03-27T01:30:00Z', '2026-03-27 02:30 GMT+1'],
        ['2026-03-28T01:30:00Z', '2026-03-28 02:30 GMT+1'],
        ['2026-03-29T01:30:00Z', '2026-03-29 03:30 GMT+2'], // 02:30 does not exist: moved past the gap, once
        ['2026-03-30T00:30:00Z', '2026-03-30 02:30 GMT+2'],
        ['2026-03-31T00:30:00Z', '2026-03-31 02:30 GMT+2'],
        ['2026-04-01T00:30:00Z', '2026-04-01 02:30 GMT+2'],
      ],
    },
    {
      change: 'Berlin fall-back (2026-10-25, 03:00 CEST -> 02:00 CET)',
      expression: '0 30 2 * * ?', timeZone: 'Europe/Berlin', from: '2026-10-21T12:00:00Z', to: '2026-10-28T12:00:00Z',
      expected: [
        ['2026-10-22T00:30:00Z', '2026-10-22 02:30 GMT+2'],
        ['2026-10-23T00:30:00Z', '2026-10-23 02:30 GMT+2'],
        ['2026-10-24T00:30:00Z', '2026-10-24 02:30 GMT+2'],
        ['2026-10-25T00:30:00Z', '2026-10-25 02:30 GMT+2'], // first pass only; not 01:30Z (02:30 CET)
        ['2026-10-26T01:30:00Z', '2026-10-26 02:30 GMT+1'],
        ['2026-10-27T01:30:00Z', '2026-10-27 02:30 GMT+1'],
        ['2026-10-28T01:30:00Z', '2026-10-28 02:30 GMT+1'],
      ],
    },
    {
      change: 'New York spring-forward (2026-03-08, 02:00 EST -> 03:00 EDT)',
      expression: '0 30 2 * * ?', timeZone: 'America/New_York', from: '2026-03-04T12:00:00Z', to: '2026-03-11T12:00:00Z',
      expected: [
        ['2026-03-05T07:30:00Z', '2026-03-05 02:30 EST'],
        ['2026-03-06T07:30:00Z', '2026-03-06 02:30 EST'],
        ['2026-03-07T07:30:00Z', '2026-03-07 02:30 EST'],
        ['2026-03-08T07:30:00Z', '2026-03-08 03:30 EDT'], // 02:30 does not exist: moved past the gap, once
        ['2026-03-09T06:30:00Z', '2026-03-09 02:30 EDT'],
        ['2026-03-10T06:30:00Z', '2026-03-10 02:30 EDT'],
        ['2026-03-11T06:30:00Z', '2026-03-11 02:30 EDT'],
      ],
    },
    {
      // New York repeats 01:00-01:59, so 02:30 happens once that night (in EST): nothing special.
      change: 'New York fall-back (2026-11-01, 02:00 EDT -> 01:00 EST)',
      expression: '0 30 2 * * ?', timeZone: 'America/New_York', from: '2026-10-28T12:00:00Z', to: '2026-11-04T12:00:00Z',
      expected: [
        ['2026-10-29T06:30:00Z', '2026-10-29 02:30 EDT'],
        ['2026-10-30T06:30:00Z', '2026-10-30 02:30 EDT'],
        ['2026-10-31T06:30:00Z', '2026-10-31 02:30 EDT'],
        ['2026-11-01T07:30:00Z', '2026-11-01 02:30 EST'],
        ['2026-11-02T07:30:00Z', '2026-11-02 02:30 EST'],
        ['2026-11-03T07:30:00Z', '2026-11-03 02:30 EST'],
        ['2026-11-04T07:30:00Z', '2026-11-04 02:30 EST'],
      ],
    },
    {
      // The New York counterpart of Berlin's repeated 02:30 (docs/cron.md): 01:30 fires at its EDT pass only.
      change: 'New York fall-back, daily 01:30 in the repeated hour',
      expression: '0 30 1 * * ?', timeZone: 'America/New_York', from: '2026-10-28T12:00:00Z', to: '2026-11-04T12:00:00Z',
      expected: [
        ['2026-10-29T05:30:00Z', '2026-10-29 01:30 EDT'],
        ['2026-10-30T05:30:00Z', '2026-10-30 01:30 EDT'],
        ['2026-10-31T05:30:00Z', '2026-10-31 01:30 EDT'],
        ['2026-11-01T05:30:00Z', '2026-11-01 01:30 EDT'], // first pass only; not 06:30Z (01:30 EST)
        ['2026-11-02T06:30:00Z', '2026-11-02 01:30 EST'],
        ['2026-11-03T06:30:00Z', '2026-11-03 01:30 EST'],
        ['2026-11-04T06:30:00Z', '2026-11-04 01:30 EST'],
      ],
    },
  ])('$change', ({ expression, timeZone, from, to, expected }) => {
    const times = fireTimesOf(simulate(expression, timeZone, from, to));
    expect(times.map((t) => [iso(t), local(t, timeZone)])).toEqual(expected);
    // One delivery per local calendar day, on consecutive days.
    const days = times.map((t) => local(t, timeZone).slice(0, 10));
    expect(new Set(days).size).toBe(days.length);
    expect(days.length).toBe(7);
  });
});

describe('an every-30-minutes job across DST, delivered by the fire timer', () => {
  it('keeps firing every 30 real minutes through the Berlin fall-back night, both passes of 02:xx', () => {
    const times = fireTimesOf(simulate('0 0/30 * * * ?', 'Europe/Berlin', '2026-10-24T21:45:00Z', '2026-10-25T03:15:00Z'));
    expect(times.map(iso)).toEqual(
      Array.from({ length: 11 }, (_, i) => iso(at('2026-10-24T22:00:00Z') + i * HOUR / 2)),
    );
    for (let i = 1; i < times.length; i += 1) expect(times[i] - times[i - 1]).toBe(HOUR / 2);
    expect(times.map((t) => local(t, 'Europe/Berlin').slice(11))).toEqual([
      '00:00 GMT+2', '00:30 GMT+2', '01:00 GMT+2', '01:30 GMT+2', '02:00 GMT+2', '02:30 GMT+2',
      '02:00 GMT+1', '02:30 GMT+1', '03:00 GMT+1', '03:30 GMT+1', '04:00 GMT+1',
    ]);
  });

  it('keeps firing every 30 real minutes through the Berlin spring-forward night, with no 02:xx', () => {
    const times = fireTimesOf(simulate('0 0/30 * * * ?', 'Europe/Berlin', '2026-03-28T22:45:00Z', '2026-03-29T02:15:00Z'));
    for (let i = 1; i < times.length; i += 1) expect(times[i] - times[i - 1]).toBe(HOUR / 2);
    expect(times.map((t) => local(t, 'Europe/Berlin').slice(11))).toEqual([
      '00:00 GMT+1', '00:30 GMT+1', '01:00 GMT+1', '01:30 GMT+1', '03:00 GMT+2', '03:30 GMT+2', '04:00 GMT+2',
    ]);
  });
});
