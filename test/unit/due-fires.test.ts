import { planDueFires, type DueFiresInput } from '../../src/leader/due-fires';

const T = Date.parse('2026-11-25T12:00:00Z');
const s = (n: number) => T + n * 1_000;

function plan(fireTimes: number[], now: number, extra: Partial<DueFiresInput> = {}) {
  return planDueFires({ fireTimes, now, misfire: true, lateToleranceMs: 1_000, leaderlessGraceMs: 4_000, ...extra });
}

describe('planDueFires', () => {
  it('runs a fire on time as itself', () => {
    expect(plan([s(0)], s(0) + 5)).toEqual({ run: { fireTime: s(0), source: 'NORMAL', catchUp: false }, skipped: [], folded: [], later: [] });
  });

  it('runs a fire still ahead (handed over a lead early) as itself, and leaves the ones after it to later ticks', () => {
    expect(plan([s(1), s(2)], s(1) - 300)).toEqual({ run: { fireTime: s(1), source: 'NORMAL', catchUp: false }, skipped: [], folded: [], later: [s(2)] });
  });

  it('a leader that fell behind: several due fires run once, as MISFIRE under the earliest; later ones wait for their own tick', () => {
    expect(plan([s(0), s(1), s(2), s(4)], s(3) + 10)).toEqual({
      run: { fireTime: s(0), source: 'MISFIRE', catchUp: false },
      skipped: [],
      folded: [s(1), s(2)],
      later: [s(4)],
    });
  });

  it('while a new leader still prepares jobs (leaderless window open, FireLoop.begin): a late fire runs as itself, one older than the grace is a misfire', () => {
    const open = { leaderlessUntil: Number.POSITIVE_INFINITY };
    expect(plan([s(0)], s(3), { ...open, misfire: false })).toEqual({ run: { fireTime: s(0), source: 'NORMAL', catchUp: true }, skipped: [], folded: [], later: [] });
    expect(plan([s(0), s(5)], s(6), { ...open, misfire: false })).toEqual({ run: { fireTime: s(5), source: 'NORMAL', catchUp: true }, skipped: [s(0)], folded: [], later: [] });
    expect(plan([s(0), s(5)], s(6), open)).toEqual({ run: { fireTime: s(0), source: 'MISFIRE', catchUp: true }, skipped: [], folded: [], later: [s(5)] });
  });

  it('a leader that fell behind with misfire off skips the due fires', () => {
    expect(plan([s(0), s(1), s(3)], s(2), { misfire: false })).toEqual({ skipped: [s(0), s(1)], folded: [], later: [s(3)] });
  });

  it('one fire later than the tolerance is a misfire too', () => {
    expect(plan([s(0)], s(1) + 1)).toMatchObject({ run: { fireTime: s(0), source: 'MISFIRE' } });
    expect(plan([s(0)], s(1) + 1, { misfire: false })).toEqual({ skipped: [s(0)], folded: [], later: [] });
  });

  it('fires that came due with no leader run each as itself, one per tick, oldest first, whatever misfire says', () => {
    for (const misfire of [true, false]) {
      const first = plan([s(1), s(2), s(3)], s(2) + 600, { misfire, leaderlessUntil: s(2) + 500 });
      expect(first).toEqual({ run: { fireTime: s(1), source: 'NORMAL', catchUp: true }, skipped: [], folded: [], later: [s(2), s(3)] });
      const second = plan(first.later, s(2) + 620, { misfire, leaderlessUntil: s(2) + 500 });
      expect(second).toEqual({ run: { fireTime: s(2), source: 'NORMAL', catchUp: true }, skipped: [], folded: [], later: [s(3)] });
      // s(3) is still ahead: a fire of its own, on time.
      expect(plan(second.later, s(2) + 640, { misfire, leaderlessUntil: s(2) + 500 })).toEqual({ run: { fireTime: s(3), source: 'NORMAL', catchUp: false }, skipped: [], folded: [], later: [] });
    }
  });

  it('leaderless fires older than the grace follow the misfire policy, before the recent ones; their MISFIRE run is catch-up work', () => {
    const input = { leaderlessUntil: s(10), leaderlessGraceMs: 3_000 };
    expect(plan([s(5), s(6), s(7), s(8), s(9), s(10)], s(10) + 200, input)).toEqual({
      run: { fireTime: s(5), source: 'MISFIRE', catchUp: true },
      skipped: [],
      folded: [s(6), s(7)],
      later: [s(8), s(9), s(10)],
    });
    expect(plan([s(5), s(6), s(7), s(8), s(9), s(10)], s(10) + 200, { ...input, misfire: false })).toEqual({
      run: { fireTime: s(8), source: 'NORMAL', catchUp: true },
      skipped: [s(5), s(6), s(7)],
      folded: [],
      later: [s(9), s(10)],
    });
  });

  it('fires after the leaderless window are judged as usual, after the window\'s own', () => {
    const input = { leaderlessUntil: s(1) + 500 };
    const first = plan([s(1), s(2), s(3)], s(3) + 50, input);
    expect(first).toEqual({ run: { fireTime: s(1), source: 'NORMAL', catchUp: true }, skipped: [], folded: [], later: [s(2), s(3)] });
    // s(2) and s(3) came due while this leader led (behind): one MISFIRE run.
    expect(plan(first.later, s(3) + 60, input)).toEqual({ run: { fireTime: s(2), source: 'MISFIRE', catchUp: false }, skipped: [], folded: [s(3)], later: [] });
  });
});
