/**
 * Which of a job's due fire times a tick runs now, which it skips and which it leaves to later
 * ticks: the leader's misfire rules as one pure function (no I/O, unit-tested in due-fires.test.ts).
 */
import type { ExecutionSource } from '../shared/registry/execution-request';

/** What one tick does with one job's due fire times. */
export interface DueFiresPlan {
  /** The fire this tick dispatches, if any. `catchUp`: it came due while no leader could dispatch it. */
  run?: { fireTime: number; source: ExecutionSource; catchUp: boolean };
  /** Fire times given up for good (misfire off), oldest first. */
  skipped: number[];
  /** Fire times coalesced into `run` (misfire on): they run once, as the MISFIRE run. */
  folded: number[];
  /** Fire times left to the ticks that follow (each job's fires are dispatched in order). */
  later: number[];
}

/** The facts {@link planDueFires} decides on. */
export interface DueFiresInput {
  /** The job's due fire times, oldest first (at least one). */
  fireTimes: readonly number[];
  /** When the tick started. */
  now: number;
  misfire: boolean;
  /** A fire handled later than this after its nominal time, while a leader was there, is late (a misfire). */
  lateToleranceMs: number;
  /**
   * Fires at or before this time came due while no leader could dispatch them (before this leader
   * took over, or while its connection was suspended); undefined when there is no such window.
   */
  leaderlessUntil?: number;
  /** How late such a fire may be and still run as itself; older ones are misfires. */
  leaderlessGraceMs: number;
}

/**
 * The rules, in the order they apply:
 * - A fire still ahead of `now` (handed over a lead before its time) runs as itself; a tick runs
 *   the fires up to the first one still ahead, and fires after it wait for ticks of their own.
 * - A fire that came due while no leader could dispatch it, and is at most `leaderlessGraceMs` late,
 *   runs as itself (source NORMAL, marked catch-up so that the fires queued behind it on its item
 *   wait for it instead of finding the item running): one per tick, in order. A takeover or a short
 *   suspension loses no fire, whatever `misfire` says.
 * - Fires older than that, and fires that came due while this leader was there but behind (several
 *   due at once, or one later than `lateToleranceMs`), are misfires: with misfire on they run once,
 *   under the earliest, as source MISFIRE (the rest are folded into it); with misfire off they are
 *   skipped. The MISFIRE run of leaderless fires is catch-up work too: the fires behind it wait for
 *   it rather than finding its item running.
 */
export function planDueFires(input: DueFiresInput): DueFiresPlan {
  const { fireTimes, now, misfire, lateToleranceMs, leaderlessUntil, leaderlessGraceMs } = input;
  const plan: DueFiresPlan = { skipped: [], folded: [], later: [] };
  const due = fireTimes.filter((t) => t <= now);
  const ahead = fireTimes.filter((t) => t > now);
  if (due.length === 0) {
    plan.run = { fireTime: ahead[0], source: 'NORMAL', catchUp: false };
    plan.later.push(...ahead.slice(1));
    return plan;
  }
  const leaderless = leaderlessUntil === undefined ? [] : due.filter((t) => t <= leaderlessUntil);
  const fresh = leaderless.filter((t) => now - t <= leaderlessGraceMs);
  const misfired = due.filter((t) => !fresh.includes(t));
  const misfiredLate = misfired.filter((t) => leaderlessUntil !== undefined && t <= leaderlessUntil);
  const behind = misfired.filter((t) => !misfiredLate.includes(t));

  // Fires too old to run as themselves: one MISFIRE run for all of them, or none. The run of
  // leaderless ones is owed work (catch-up), as the recent leaderless fires are: a regular fire that
  // finds it running waits behind it instead of marking a misfire and re-running the item at once.
  const coalesce = (times: readonly number[], catchUp: boolean) => {
    if (times.length === 0) return;
    if (!misfire) {
      plan.skipped.push(...times);
      return;
    }
    if (plan.run) plan.later.push(...times);
    else {
      plan.run = { fireTime: times[0], source: 'MISFIRE', catchUp };
      plan.folded.push(...times.slice(1));
    }
  };
  coalesce(misfiredLate, true);
  for (const t of fresh) {
    if (plan.run) plan.later.push(t);
    else plan.run = { fireTime: t, source: 'NORMAL', catchUp: true };
  }
  if (behind.length > 0) {
    if (plan.run) plan.later.push(...behind);
    else if (behind.length === 1 && now - behind[0] <= lateToleranceMs) plan.run = { fireTime: behind[0], source: 'NORMAL', catchUp: false };
    else coalesce(behind, false);
  }
  plan.later.push(...ahead);
  plan.later.sort((a, b) => a - b);
  return plan;
}
