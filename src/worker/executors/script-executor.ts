/**
 * SCRIPT jobs: `script.command` runs as a process of its own, without a shell, with the
 * ShardingContext JSON as its last argument and in SHARDCRON_SHARDING_CONTEXT.
 *
 * Decisions:
 * - `shell: false`, argv as given: an item parameter such as `; rm -rf /` or `$(...)` reaches the
 *   program as one verbatim argument, never a shell (ElasticJob's commons-exec also appends the
 *   JSON as one argument). A user who wants a shell names it: `['/bin/sh', '-c', '...']`.
 * - `detached: true`: the script leads a process group of its own, so a timeout or an abort ends it
 *   with its children and grandchildren (SIGTERM to the group, SIGKILL after the grace period).
 *   What is left of the group when the script exits by itself is ended the same way: nothing a
 *   run started outlives it (a daemon a script starts is killed; one that calls setsid() escapes).
 * - The run ends on the script's exit plus its group being gone, not on the pipes closing: a
 *   process outside the group may still hold them. They get a short while to deliver what is
 *   buffered, then are destroyed.
 * - stdout is drained (a full pipe would block the script) and only its last 1 KB is kept, for the
 *   failure's details; stderr's last 4 KB goes into the failure message, so into the record.
 * - stdin is /dev/null: nobody would ever answer a script waiting on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { onAbort } from '../../shared/abort-listeners';
import type { ShardingContext } from '../../shared/config/job-definition';
import { SHARDING_CONTEXT_ENV, shardingContextJson, type ScriptSpec } from '../../shared/config/job-type-specs';
import { ByteTail } from './bounded-capture';
import { ExecutionFailure, abortedFailure, type ExecutorReport, type JobExecutor } from './job-executor';
import { endProcessGroup, type GroupEnding } from './process-group';

/** Bytes of stderr a failure carries. */
export const STDERR_TAIL_BYTES = 4096;
/** Bytes of stdout kept for a failure's details. */
const STDOUT_TAIL_BYTES = 1024;
/** How long the pipes may stay open after the group is gone (held by a process that left it). */
const PIPE_DRAIN_MS = 500;

/** Options of {@link createScriptExecutor}. */
export interface ScriptExecutorOptions {
  /** Time between SIGTERM and SIGKILL when a script's process group is ended. Default 2000 ms. */
  readonly killGraceMs?: number;
}

/** How the script's process ended. */
type Ending = { readonly code: number | null; readonly signal: NodeJS.Signals | null } | { readonly spawnError: NodeJS.ErrnoException };

/** Why shardcron ended the group before the script exited, if it did. */
type StopReason = 'timeout' | 'abort';

const program = (spec: ScriptSpec): string => JSON.stringify(spec.command[0]);

/** A spawn error in words: which of the program or the directory is missing or not usable. */
function spawnFailure(spec: ScriptSpec, err: NodeJS.ErrnoException): ExecutionFailure {
  // Node reports a missing cwd as ENOENT of the program: tell them apart.
  if (spec.cwd !== undefined && err.code === 'ENOENT' && !fs.existsSync(spec.cwd)) {
    return new ExecutionFailure(`script cwd ${JSON.stringify(spec.cwd)} does not exist`, {}, { code: err.code }, { cause: err });
  }
  const why =
    err.code === 'ENOENT'
      ? 'was not found: give an absolute path, or a program on the worker\'s PATH'
      : err.code === 'EACCES'
        ? 'is not executable by the worker (EACCES)'
        : `could not be started: ${err.message}`;
  return new ExecutionFailure(`script program ${program(spec)} ${why}`, {}, { code: err.code }, { cause: err });
}

function stderrPart(stderr: ByteTail): string {
  const text = stderr.text().trimEnd();
  if (text === '') return '; no stderr output';
  return `; stderr${stderr.truncated ? ` (last ${STDERR_TAIL_BYTES} bytes)` : ''}:\n${text}`;
}

/** The run's outcome from how the script ended and whether shardcron stopped it. */
function outcome(spec: ScriptSpec, ctx: ShardingContext, ending: Ending, stopped: StopReason | undefined, stderr: ByteTail, stdout: ByteTail): ExecutorReport {
  if ('spawnError' in ending) throw spawnFailure(spec, ending.spawnError);
  const report: ExecutorReport = ending.code !== null ? { exitCode: ending.code } : { signal: ending.signal ?? undefined };
  const details = { stderrTail: stderr.text(), stdoutTail: stdout.text() };
  if (stopped === 'abort') throw abortedFailure(`script ${program(spec)}`, ctx.signal, report, details);
  if (stopped === 'timeout') {
    throw new ExecutionFailure(`script ${program(spec)} timed out after ${spec.timeoutMs} ms; its process group was killed${stderrPart(stderr)}`, report, details, { timedOut: true });
  }
  if (ending.code === 0) return report;
  const how = ending.code !== null ? `exited with code ${ending.code}` : `was killed by ${ending.signal}`;
  throw new ExecutionFailure(`script ${program(spec)} ${how}${stderrPart(stderr)}`, report, details);
}

/** Resolves with how `child` ended: its exit, or the error that kept it from starting. */
function ended(child: ChildProcess): Promise<Ending> {
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    // With no pid the spawn failed and 'error' says why ('exit' may not come). Listening for good:
    // an 'error' with no listener would crash the worker.
    child.on('error', (err: NodeJS.ErrnoException) => child.pid === undefined && resolve({ spawnError: err }));
  });
}

/** Starts the script; a spawn that throws at once (a bad argument) is a failure like one that fails later. */
function start(spec: ScriptSpec, json: string): ChildProcess {
  const [file, ...args] = spec.command as [string, ...string[]];
  try {
    return spawn(file, [...args, json], {
      shell: false,
      detached: true,
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env, [SHARDING_CONTEXT_ENV]: json },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    throw spawnFailure(spec, err as NodeJS.ErrnoException);
  }
}

/** Runs one SCRIPT item; see the module comment. */
async function runScript(spec: ScriptSpec, ctx: ShardingContext, killGraceMs: number): Promise<ExecutorReport> {
  if (ctx.signal.aborted) throw abortedFailure(`script ${program(spec)}`, ctx.signal);
  const child = start(spec, shardingContextJson(ctx));
  const closed = once(child, 'close').catch(() => undefined);
  const exited = ended(child);
  const stdout = new ByteTail(STDOUT_TAIL_BYTES);
  const stderr = new ByteTail(STDERR_TAIL_BYTES);
  const pipes = [child.stdout!, child.stderr!];
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
  for (const pipe of pipes) pipe.on('error', (err) => ctx.log.debug({ err }, 'script pipe error'));
  const pid = child.pid;
  let stopped: StopReason | undefined;
  let stopping: Promise<GroupEnding> | undefined;
  const stop = (reason: StopReason): void => {
    if (stopped !== undefined || pid === undefined) return;
    stopped = reason;
    ctx.log.info({ scriptPid: pid, reason }, "ending the script's process group");
    stopping = endProcessGroup(pid, killGraceMs);
  };
  const timer = spec.timeoutMs !== undefined ? setTimeout(() => stop('timeout'), spec.timeoutMs) : undefined;
  const stopListening = onAbort(ctx.signal, () => stop('abort'));
  let how: Ending;
  try {
    how = await exited;
  } finally {
    clearTimeout(timer);
    stopListening();
  }
  if (pid !== undefined) {
    // Whatever the script left running goes too (a stop in progress is awaited, not repeated).
    const groupEnded = await (stopping ?? endProcessGroup(pid, killGraceMs));
    if (groupEnded === 'lingering') ctx.log.error({ scriptPid: pid }, "processes of the script's group outlived SIGKILL (stuck in the kernel?)");
    else if (groupEnded !== 'gone' && stopped === undefined) ctx.log.warn({ scriptPid: pid, groupEnded }, 'ended processes the script left running');
    await Promise.race([closed, delay(PIPE_DRAIN_MS)]);
  }
  for (const pipe of pipes) pipe.destroy();
  return outcome(spec, ctx, how, stopped, stderr, stdout);
}

/** A SCRIPT executor; `killGraceMs` is the time between SIGTERM and SIGKILL. */
export function createScriptExecutor(options: ScriptExecutorOptions = {}): JobExecutor<ScriptSpec> {
  const killGraceMs = options.killGraceMs ?? 2_000;
  return Object.freeze({ run: (spec: ScriptSpec, ctx: ShardingContext) => runScript(spec, ctx, killGraceMs) });
}

/** The SCRIPT executor with the default grace period (2 s between SIGTERM and SIGKILL). */
export const scriptExecutor: JobExecutor<ScriptSpec> = createScriptExecutor();
