/** The process table as `ps` shows it, for tests that assert what a run left behind. */
import { execFileSync } from 'node:child_process';

/** One row of `ps`. */
export interface ProcessRow {
  pid: number;
  pgid: number;
  /** `ps` state: `S`, `R`, `Z` (zombie: exited, not reaped yet)... */
  stat: string;
  args: string;
}

/** Every process of group `pgid` in the process table, zombies included. */
export function processGroupMembers(pgid: number): ProcessRow[] {
  const table = execFileSync('ps', ['-eo', 'pid=,pgid=,stat=,args='], { encoding: 'utf8' });
  return table
    .split('\n')
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(\S+)\s?(.*)$/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([, pid, group, stat, args]) => ({ pid: Number(pid), pgid: Number(group), stat: stat!, args: args! }))
    .filter((row) => row.pgid === pgid);
}

/** The members of group `pgid` that still run (not zombies). */
export function liveProcessGroupMembers(pgid: number): ProcessRow[] {
  return processGroupMembers(pgid).filter((row) => !row.stat.startsWith('Z'));
}
