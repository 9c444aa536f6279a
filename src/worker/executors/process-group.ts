/**
 * Ending a process group: what a SCRIPT job leaves behind must not outlive its run. The script is
 * spawned detached, so its pid is the id of a process group of its own that its children and
 * grandchildren inherit; signalling `-pgid` reaches all of them at once, even once the script
 * itself is gone. (A descendant that calls setsid() leaves the group and cannot be reached so.)
 */
import fs from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/** How often a group is checked while it is being waited for. */
const POLL_MS = 25;

/**
 * How long a group may outlive SIGKILL: a killed process dies as soon as it leaves the kernel, so
 * one still alive after this is stuck there (uninterruptible I/O) and waiting longer will not help.
 */
const KILLED_LINGER_MS = 2_000;

/**
 * Whether group `pgid` has a member that is not a zombie, from /proc (Linux), or undefined where
 * /proc cannot tell. A zombie runs nothing and holds nothing but its process-table entry; it stays
 * until whoever adopted it reaps it, which may take seconds (or for ever under an init that does
 * not reap), so waiting on zombies would hold a run for nothing.
 */
function hasLiveMemberInProc(pgid: number): boolean | undefined {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'latin1');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so read after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

/**
 * True while any process of group `pgid` is alive: a member exists (EPERM: one exists that is not
 * ours to signal) and, where /proc tells, at least one member is not a zombie.
 */
export function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return hasLiveMemberInProc(pgid) ?? true;
}

/** Sends `signal` to every process of group `pgid`; false when the group is gone. */
function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Resolves true once group `pgid` is gone, false if it still exists after `ms`. */
async function waitUntilGone(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (!processGroupAlive(pgid)) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await delay(Math.min(POLL_MS, left));
  }
}

/**
 * How a group ended: it was already gone, SIGTERM ended it, SIGKILL did, or something of it was
 * still there after SIGKILL and {@link KILLED_LINGER_MS}.
 */
export type GroupEnding = 'gone' | 'terminated' | 'killed' | 'lingering';

/**
 * Ends process group `pgid`: SIGTERM (and SIGCONT, so a stopped member can act on it), then SIGKILL
 * once `graceMs` passed with any member still alive. Resolves when the group is gone, or
 * `'lingering'` when it outlived the SIGKILL by {@link KILLED_LINGER_MS}: never waits for ever.
 */
export async function endProcessGroup(pgid: number, graceMs: number): Promise<GroupEnding> {
  // Zombies alone are no group to end (and signalling them would succeed, saying nothing).
  if (!processGroupAlive(pgid) || !signalGroup(pgid, 'SIGTERM')) return 'gone';
  signalGroup(pgid, 'SIGCONT');
  if (await waitUntilGone(pgid, graceMs)) return 'terminated';
  if (!signalGroup(pgid, 'SIGKILL')) return 'terminated';
  return (await waitUntilGone(pgid, KILLED_LINGER_MS)) ? 'killed' : 'lingering';
}
