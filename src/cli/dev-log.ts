/**
 * The human log of `shardcron dev`: turns the JSON lines of its node processes (`shardcron start`)
 * into short lines a person can follow, e.g.
 *
 *   12:00:05  settle-accounts  item 2/3 (C)  ran on worker-2  12 ms
 *
 * Pure: no I/O, no clock of its own, so it is unit-tested with fixed lines and times.
 */

/** pino's numeric levels. */
const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const WARN = 40;

/** The fields of a node's log line that the renderer reads; everything is optional (it is input). */
interface LogLine {
  level?: number;
  time?: number;
  msg?: string;
  job?: string;
  item?: number;
  fireTime?: number;
  instanceId?: string;
  source?: string;
  status?: string;
  durationMs?: number;
  reason?: string;
  shardingTotalCount?: number;
  shardingParameter?: string;
  epoch?: number;
  roles?: string[];
  signal?: string;
  url?: string;
  err?: { message?: string; type?: string };
}

const VERBS: Readonly<Record<string, string>> = { completed: 'ran', failed: 'FAILED', aborted: 'aborted', skipped: 'skipped' };

/** `HH:MM:SS` in local time. */
export function clockTime(epochMs: number): string {
  const d = new Date(epochMs);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

function parse(line: string): LogLine | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null ? (value as LogLine) : undefined;
  } catch {
    return undefined;
  }
}

/** Options of {@link DevLogRenderer}. */
export interface DevLogRendererOptions {
  /** When `shardcron dev` was launched (epoch ms): first runs say how long after it they came. */
  launchedAt: number;
  /** Job names, to align the job column. */
  jobNames: readonly string[];
}

/** Stateful only in what it remembers for display: which jobs have run already. */
export class DevLogRenderer {
  private readonly jobWidth: number;
  private readonly seenJobs = new Set<string>();

  constructor(private readonly options: DevLogRendererOptions) {
    this.jobWidth = Math.max(0, ...options.jobNames.map((n) => n.length));
  }

  /**
   * The human lines (none, or one) for one output line of the process `name`. `now` stamps lines
   * that carry no time of their own (plain text, e.g. a stack trace on stderr).
   */
  render(name: string, line: string, now: number): string[] {
    const entry = parse(line);
    if (!entry) return line.trim() === '' ? [] : [`${clockTime(now)}  ${name} | ${line}`];
    const time = clockTime(entry.time ?? now);
    switch (entry.msg) {
      case 'item finished':
        return [this.execution(entry, now)];
      case 'leadership acquired':
        return [`${time}  ${name} is the leader now (epoch ${entry.epoch ?? '?'})`];
      case 'leadership lost':
        return [`${time}  ${name} is no longer the leader (${entry.reason ?? 'unknown reason'})`];
      case 'console listening':
        return [`${time}  ${name} serves the console at ${entry.url ?? '?'}`];
      case 'node started':
        return [`${time}  ${name} is up (${(entry.roles ?? []).join(', ') || 'no roles'})`];
      case 'shutting down':
        return [`${time}  ${name} is shutting down (${entry.signal ?? 'signal'})`];
      case 'node closed':
        return [`${time}  ${name} stopped`];
      default:
        break;
    }
    if ((entry.level ?? 0) < WARN) return [];
    const level = (LEVEL_NAMES[entry.level ?? 0] ?? 'log').toUpperCase();
    const where = entry.job === undefined ? '' : ` [${entry.job}${entry.item === undefined ? '' : ` item ${entry.item}`}]`;
    const cause = entry.err?.message ? `: ${entry.err.message}` : '';
    const reason = entry.reason ? ` (${entry.reason})` : '';
    return [`${time}  ${name}  ${level}${where} ${entry.msg ?? ''}${reason}${cause}`];
  }

  private execution(entry: LogLine, now: number): string {
    const job = entry.job ?? '?';
    const total = entry.shardingTotalCount === undefined ? '' : `/${entry.shardingTotalCount}`;
    const parameter = entry.shardingParameter ? ` (${entry.shardingParameter})` : '';
    const verb = VERBS[entry.status ?? ''] ?? entry.status ?? 'finished';
    const parts = [
      clockTime(entry.fireTime ?? entry.time ?? now),
      job.padEnd(this.jobWidth),
      `item ${entry.item ?? '?'}${total}${parameter}`,
      `${verb} on ${entry.instanceId ?? '?'}`,
      `${entry.durationMs ?? 0} ms`,
    ];
    if (entry.source && entry.source !== 'NORMAL') parts.push(entry.source);
    if (entry.reason) parts.push(`(${entry.reason})`);
    if (!this.seenJobs.has(job)) {
      this.seenJobs.add(job);
      const startedAt = (entry.time ?? now) - (entry.durationMs ?? 0);
      parts.push(`first run, started ${((startedAt - this.options.launchedAt) / 1000).toFixed(1)} s after launch`);
    }
    return parts.join('  ');
  }
}
