import pino from 'pino';
import { ErrorCodes, ShardcronError } from '../../src/shared/errors';
import { FireTimer, type DueJob, type FireSchedule, type FireTimerOptions } from '../../src/leader/fire-timer';
import { FakeClock } from '../helpers/fake-clock';

/** Fires at every multiple of `periodMs` (plus `offsetMs`). */
function every(periodMs: number, offsetMs = 0): FireSchedule & { calls: number } {
  const schedule = {
    calls: 0,
    next(after: number): number {
      schedule.calls += 1;
      return Math.floor((after - offsetMs) / periodMs) * periodMs + offsetMs + periodMs;
    },
  };
  return schedule;
}

/** Fires at the given times only, then never again. */
function at(...times: number[]): FireSchedule {
  return { next: (after) => times.find((t) => t > after) ?? null };
}

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

function harness(options: Partial<FireTimerOptions> & { startWallMs?: number } = {}) {
  const clock = new FakeClock(options.startWallMs ?? 0);
  const calls: Array<{ due: DueJob[]; now: number }> = [];
  const logs: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line) as LogLine) });
  const timer = new FireTimer({
    clock,
    logger,
    onDue: (due, now) => {
      calls.push({ due, now });
    },
    ...options,
  });
  const delivered = (job: string): number[] => calls.flatMap((c) => c.due.filter((d) => d.job === job).flatMap((d) => d.fireTimes));
  const warnings = (text: string): LogLine[] => logs.filter((l) => l.level === 40 && l.msg.includes(text));
  return { clock, calls, logs, timer, delivered, warnings };
}

describe('FireTimer', () => {
  it('delivers every job due at one wake-up in one onDue call, sorted by fire time then job name', () => {
    const { clock, calls, timer } = harness();
    timer.schedule('b', at(5_000));
    timer.schedule('c', at(3_000));
    timer.schedule('a', at(5_000));
    timer.schedule('d', at(9_000));
    timer.start();
    clock.block(6_000); // one late wake-up sees c, a and b due at once
    clock.advance(0);
    expect(calls).toHaveLength(1);
    expect(calls[0].now).toBe(6_000);
    expect(calls[0].due.map((d) => d.job)).toEqual(['c', 'a', 'b']);
    expect(calls[0].due.map((d) => d.fireTimes)).toEqual([[3_000], [5_000], [5_000]]);

    clock.advance(10_000);
    expect(calls.map((c) => c.due.map((d) => d.job))).toEqual([['c', 'a', 'b'], ['d']]);
    timer.close();
  });

  it('keeps one underlying timeout for many jobs and re-arms only when an earlier job arrives', () => {
    const { clock, timer } = harness({ maxSleepMs: 60_000 });
    timer.start();
    for (let i = 0; i < 1_000; i += 1) timer.schedule(`job-${i}`, at(30_000 + i));
    expect(clock.pending()).toBe(1);
    expect(clock.delays).toEqual([30_000]); // later jobs never touched the armed timeout
    timer.schedule('early', at(5_000));
    expect(clock.pending()).toBe(1);
    expect(clock.pendingAt()).toBe(5_000);
    expect(timer.size()).toBe(1_001);
    timer.close();
  });

  it('schedules the next fire from the last delivered one: times strictly increase, none twice', () => {
    const { clock, timer, delivered } = harness();
    const schedule = every(1_000);
    timer.schedule('j', schedule);
    timer.start();
    expect(timer.nextFireTime('j')).toBe(1_000);
    for (let step = 0; step < 40; step += 1) {
      clock.advance(137 + (step % 5) * 311);
      if (step % 3 === 0) clock.fireEarly(); // early wake-ups sprinkled in
      const last = timer.lastFireTime('j');
      if (last !== undefined) expect(timer.nextFireTime('j')).toBe(last + 1_000);
    }
    const times = delivered('j');
    const expected = Array.from({ length: Math.floor(clock.now() / 1_000) }, (_, i) => (i + 1) * 1_000);
    expect(times).toEqual(expected);
    timer.close();
  });

  it('delivers nothing on an early wake-up and re-arms for the remaining time', () => {
    const { clock, calls, timer } = harness({ maxSleepMs: 10_000 });
    timer.schedule('j', at(5_000));
    timer.start();
    expect(clock.pendingAt()).toBe(5_000);
    clock.advance(3_000);
    clock.fireEarly();
    expect(calls).toHaveLength(0);
    expect(clock.pending()).toBe(1);
    expect(clock.pendingAt()).toBe(5_000); // re-armed for the 2,000 ms left
    clock.advance(1_999);
    clock.fireEarly(); // Node timers may fire a millisecond early
    expect(calls).toHaveLength(0);
    clock.advance(1);
    expect(calls.map((c) => c.due)).toEqual([[{ job: 'j', fireTimes: [5_000], truncated: false }]]);
    timer.close();
  });

  it('delivers every due fire time after a late wake-up, capped at maxCatchUp', () => {
    const { clock, calls, timer, warnings } = harness({ maxCatchUp: 3 });
    timer.schedule('few', every(1_000));
    timer.schedule('many', every(1_000, 500));
    timer.start();
    clock.block(3_200); // event loop blocked for 3.2 s
    clock.advance(0);
    expect(calls).toHaveLength(1);
    expect(calls[0].due).toEqual([
      { job: 'many', fireTimes: [500, 1_500, 2_500], truncated: false },
      { job: 'few', fireTimes: [1_000, 2_000, 3_000], truncated: false },
    ]);
    expect(warnings('late')).toHaveLength(1);

    clock.block(10_000); // suspended: now 13,200
    clock.advance(0);
    expect(calls[1].due).toEqual([
      { job: 'many', fireTimes: [3_500, 4_500, 5_500], truncated: true },
      { job: 'few', fireTimes: [4_000, 5_000, 6_000], truncated: true },
    ]);
    // The cut times are skipped, not delivered later: the next fire is the first after the wake-up.
    expect(timer.lastFireTime('few')).toBe(6_000);
    expect(timer.nextFireTime('few')).toBe(14_000);
    expect(timer.nextFireTime('many')).toBe(13_500);
    clock.advance(1_000);
    expect(calls.slice(2).flatMap((c) => c.due)).toEqual([
      { job: 'many', fireTimes: [13_500], truncated: false },
      { job: 'few', fireTimes: [14_000], truncated: false },
    ]);
    timer.close();
  });

  it('notices a forward wall-clock jump within maxSleepMs and delivers it as a late wake-up', () => {
    const hour = 3_600_000;
    const { clock, calls, timer, warnings } = harness({ maxSleepMs: 1_000 });
    timer.schedule('hourly', every(hour));
    timer.start();
    clock.advance(10_000);
    expect(calls).toHaveLength(0);
    clock.jump(2 * hour + 5_000);
    clock.advance(1_000);
    expect(calls.map((c) => c.due)).toEqual([[{ job: 'hourly', fireTimes: [hour, 2 * hour], truncated: false }]]);
    expect(warnings('late')).toHaveLength(1);
    expect(Math.max(...clock.delays)).toBeLessThanOrEqual(1_000);
    timer.close();
  });

  it('never re-delivers after a backward wall-clock jump: waits for the clock, warns once', () => {
    const { clock, timer, delivered, warnings } = harness();
    timer.schedule('j', every(1_000));
    timer.start();
    clock.advance(10_000);
    expect(delivered('j')).toEqual([1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000, 9_000, 10_000]);
    clock.jump(-3_600_000); // wall clock now 10,000 - 1 h
    clock.advance(3_600_000); // an hour of capped sleeps until the wall clock is back at 10,000
    expect(delivered('j')).toHaveLength(10);
    expect(timer.nextFireTime('j')).toBe(11_000);
    clock.advance(1_000);
    expect(delivered('j').slice(10)).toEqual([11_000]);
    expect(warnings('backward')).toHaveLength(1);
    expect(warnings('late')).toHaveLength(0);
    expect(Math.max(...clock.delays)).toBeLessThanOrEqual(1_000);

    // Re-adding the job while the clock is behind cannot hand out an old time either.
    clock.jump(-60_000);
    timer.schedule('j', every(1_000));
    expect(timer.nextFireTime('j')).toBe(12_000);
    timer.close();
  });

  it('drops a job whose schedule never fires again', () => {
    const { clock, timer, delivered } = harness();
    timer.schedule('twice', at(1_000, 2_000));
    timer.schedule('gone', at(-5));
    expect(timer.size()).toBe(1);
    expect(timer.nextFireTime('gone')).toBeUndefined();
    timer.start();
    clock.advance(5_000);
    expect(delivered('twice')).toEqual([1_000, 2_000]);
    expect(timer.size()).toBe(0);
    expect(timer.nextFireTime('twice')).toBeUndefined();
    expect(clock.pending()).toBe(0);
    timer.close();
  });

  it('drops a job whose schedule throws or goes backwards at a wake-up, and keeps the others', () => {
    const { clock, timer, delivered, logs } = harness();
    let n = 0;
    timer.schedule('bad', { next: (after) => (n++ === 0 ? after + 1_000 : after) });
    timer.schedule('throws', { next: (after) => { if (after > 0) throw new Error('boom'); return 1_000; } });
    timer.schedule('good', every(1_000));
    timer.start();
    clock.advance(3_000);
    expect(delivered('bad')).toEqual([1_000]);
    expect(delivered('throws')).toEqual([1_000]);
    expect(delivered('good')).toEqual([1_000, 2_000, 3_000]);
    expect(timer.size()).toBe(1);
    expect(logs.filter((l) => l.level === 50).map((l) => l.job)).toEqual(['bad', 'throws']);
    expect(() => timer.schedule('x', { next: () => 0 }, 10)).toThrow(ShardcronError);
    timer.close();
  });

  it('survives an onDue that throws or rejects', async () => {
    const clock = new FakeClock();
    const logs: LogLine[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => logs.push(JSON.parse(line) as LogLine) });
    const seen: number[] = [];
    const timer = new FireTimer({
      clock,
      logger,
      onDue: (due) => {
        seen.push(due[0].fireTimes[0]);
        if (seen.length === 1) throw new Error('leader bug');
        if (seen.length === 2) return Promise.reject(new Error('async leader bug'));
        return undefined;
      },
    });
    timer.schedule('j', every(1_000));
    timer.start();
    clock.advance(3_000);
    await Promise.resolve();
    expect(seen).toEqual([1_000, 2_000, 3_000]);
    expect(logs.map((l) => l.msg)).toEqual(['onDue threw; the timer goes on', 'onDue rejected']);
    expect(clock.pending()).toBe(1);
    timer.close();
  });

  it('lets onDue schedule and unschedule re-entrantly', () => {
    const clock = new FakeClock();
    const calls: DueJob[][] = [];
    const timer: FireTimer = new FireTimer({
      clock,
      onDue: (due) => {
        calls.push(due);
        if (calls.length === 1) {
          timer.unschedule('b'); // removed during delivery (it was due too: already handed out)
          timer.unschedule('c'); // removed before its turn
          timer.schedule('a', every(500), due[0].fireTimes[0]); // config change
          timer.schedule('d', at(1_200));
          expect(timer.nextFireTime('a')).toBe(1_500);
        }
      },
    });
    timer.schedule('a', every(1_000));
    timer.schedule('b', every(1_000));
    timer.schedule('c', at(1_100));
    timer.start();
    clock.advance(2_000);
    expect(calls.map((due) => due.map((d) => [d.job, ...d.fireTimes]))).toEqual([[['a', 1_000], ['b', 1_000]], [['d', 1_200]], [['a', 1_500]], [['a', 2_000]]]);
    expect(timer.size()).toBe(1);
    expect(clock.pending()).toBe(1);
    timer.close();
  });

  it('replacing a job keeps its last delivered time, so an older `after` cannot re-deliver', () => {
    const { clock, timer, delivered } = harness();
    timer.schedule('j', every(1_000));
    timer.start();
    clock.advance(3_000);
    timer.schedule('j', every(1_000), 0);
    expect(timer.nextFireTime('j')).toBe(4_000);
    // A new job with an `after` in the past (a new leader resuming from its ledger) catches up.
    timer.schedule('resumed', every(1_000), 500);
    clock.advance(0);
    expect(delivered('resumed')).toEqual([1_000, 2_000, 3_000]);
    expect(delivered('j')).toEqual([1_000, 2_000, 3_000]);
    timer.close();
  });

  it('arms nothing before start; close is idempotent, clears the timeout and stops deliveries', () => {
    const { clock, calls, timer } = harness();
    timer.schedule('j', every(1_000));
    expect(clock.pending()).toBe(0);
    timer.start();
    timer.start();
    expect(clock.pending()).toBe(1);
    timer.close();
    timer.close();
    expect(clock.pending()).toBe(0);
    expect(timer.state).toBe('closed');
    clock.advance(5_000);
    expect(calls).toHaveLength(0);
    expect(() => timer.start()).toThrow(expect.objectContaining({ code: ErrorCodes.CLOSED }));
  });

  it('rejects invalid options naming the field', () => {
    const onDue = (): void => undefined;
    expect(() => new FireTimer({ onDue, maxSleepMs: 0 })).toThrow(/maxSleepMs/);
    expect(() => new FireTimer({ onDue, maxCatchUp: 1.5, jumpToleranceMs: -1 })).toThrow(/maxCatchUp[\s\S]*jumpToleranceMs|jumpToleranceMs[\s\S]*maxCatchUp/);
  });

  it('matches a naive model under random schedule/unschedule/reschedule and clock abuse', () => {
    let seed = 42;
    const random = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const periods = [700, 1_000, 1_500, 3_000];
    const model = new Map<string, { schedule: FireSchedule; next: number; last?: number }>();
    const clock = new FakeClock(1_000_000);
    const maxCatchUp = 4;
    const mismatches: string[] = [];
    let batches = 0;
    const timer: FireTimer = new FireTimer({
      clock,
      maxCatchUp,
      maxSleepMs: 2_000,
      onDue: (due, now) => {
        batches += 1;
        const expected = [...model.entries()]
          .filter(([, m]) => m.next <= now)
          .sort(([ja, a], [jb, b]) => a.next - b.next || (ja < jb ? -1 : 1))
          .map(([job, m]) => {
            const fireTimes = [m.next];
            let next = m.schedule.next(m.next) as number;
            while (next <= now && fireTimes.length < maxCatchUp) {
              fireTimes.push(next);
              next = m.schedule.next(next) as number;
            }
            const truncated = next <= now;
            m.last = fireTimes[fireTimes.length - 1];
            m.next = truncated ? (m.schedule.next(now) as number) : next;
            return { job, fireTimes, truncated };
          });
        if (JSON.stringify(due) !== JSON.stringify(expected)) mismatches.push(`at ${now}: ${JSON.stringify(due)} vs ${JSON.stringify(expected)}`);
      },
    });
    const add = (job: string): void => {
      const schedule = every(periods[Math.floor(random() * periods.length)], Math.floor(random() * 500));
      const last = model.get(job)?.last;
      const after = Math.max(clock.now() - Math.floor(random() * 5_000), last ?? Number.NEGATIVE_INFINITY);
      timer.schedule(job, schedule, after);
      model.set(job, { schedule, next: schedule.next(after) as number, last });
    };
    for (let i = 0; i < 200; i += 1) add(`job-${i}`);
    timer.start();
    for (let step = 0; step < 2_000; step += 1) {
      const r = random();
      const job = `job-${Math.floor(random() * 250)}`;
      if (r < 0.2) add(job);
      else if (r < 0.3) {
        timer.unschedule(job);
        model.delete(job);
      } else if (r < 0.33) clock.block(Math.floor(random() * 8_000));
      else if (r < 0.35) {
        clock.jump(Math.floor((random() - 0.5) * 10_000));
        clock.advance(2_000); // a forward jump is only seen at the next (capped) wake-up
      }
      else if (r < 0.4) clock.fireEarly();
      clock.advance(Math.floor(random() * 600));
      // Plain comparisons: 500,000 expect() calls would make this test slow.
      for (const [name, m] of model) {
        if (timer.nextFireTime(name) !== m.next || timer.lastFireTime(name) !== m.last || !(m.next > clock.now())) {
          mismatches.push(`step ${step} ${name}: next ${timer.nextFireTime(name)} vs ${m.next}, last ${timer.lastFireTime(name)} vs ${m.last}, now ${clock.now()}`);
        }
      }
      if (timer.size() !== model.size || clock.pending() !== (model.size > 0 ? 1 : 0)) mismatches.push(`step ${step}: size/pending`);
      if (mismatches.length > 5) break;
    }
    expect(mismatches).toEqual([]);
    expect(batches).toBeGreaterThan(1_000);
    timer.close();
  });

  it('fires 10,000 per-second jobs over a simulated minute: 600,000 fire times in 60 onDue calls (counts only, nothing timed)', () => {
    const clock = new FakeClock();
    const jobs = 10_000;
    const perCall: number[] = [];
    let total = 0;
    let orderOk = true;
    let timesOk = true;
    const timer = new FireTimer({
      clock,
      onDue: (due, now) => {
        perCall.push(due.length);
        for (let i = 0; i < due.length; i += 1) {
          total += due[i].fireTimes.length;
          if (due[i].fireTimes.length !== 1 || due[i].fireTimes[0] !== now) timesOk = false;
          if (i > 0 && !(due[i - 1].job < due[i].job)) orderOk = false;
        }
      },
    });
    const schedule = every(1_000);
    for (let i = 0; i < jobs; i += 1) timer.schedule(`job-${String(i).padStart(5, '0')}`, schedule);
    timer.start();
    clock.advance(60_000);
    expect(total).toBe(jobs * 60);
    expect(perCall).toEqual(Array.from({ length: 60 }, () => jobs));
    expect(orderOk).toBe(true);
    expect(timesOk).toBe(true);
    expect(clock.delays.length).toBeLessThanOrEqual(61);
    timer.close();
  });
});
