import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { LOOPBACK } from './free-port';

/** Children still alive, killed synchronously if this process exits without closing them. */
const liveChildren = new Set<ChildProcess>();
/** Synchronous cleanups (temp dirs) run on exit after every child has been killed. */
const exitCleanups = new Set<() => void>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of liveChildren) {
      try { if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL'); } catch { /* already gone */ }
    }
    for (const cleanup of exitCleanups) {
      try { cleanup(); } catch { /* best effort: the process is exiting */ }
    }
  });
}

/** Pids of every child started here and not yet exited; a test harness asserts it is empty. */
export function liveChildPids(): number[] {
  return [...liveChildren].flatMap((child) => (child.pid === undefined ? [] : [child.pid]));
}

/** Runs `cleanup` synchronously if the process exits first; returns a function that unregisters it. */
export function onProcessExit(cleanup: () => void): () => void {
  installExitHook();
  exitCleanups.add(cleanup);
  return () => exitCleanups.delete(cleanup);
}

/** Creates a temp dir; `remove()` deletes it, and so does process exit if `remove()` never came. */
export function makeTempDir(prefix: string): { root: string; remove: () => void } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const removeNow = () => fs.rmSync(root, { recursive: true, force: true });
  const unregister = onProcessExit(removeNow);
  return { root, remove: () => { unregister(); removeNow(); } };
}

/** Absolute path of an executable: `name` itself when it contains a slash, else the first hit on PATH. */
export function findExecutable(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = name.includes('/')
    ? [name]
    : (env.PATH ?? '').split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, name));
  return candidates.find((file) => {
    try { fs.accessSync(file, fs.constants.X_OK); return fs.statSync(file).isFile(); } catch { return false; }
  });
}

/** Linux only: `setpriv --pdeathsig KILL` makes the kernel kill the child when this process dies. */
const setpriv = process.platform === 'linux' ? findExecutable('setpriv') : undefined;

/**
 * Calls `check` every `intervalMs` until it returns something other than `undefined`/`false`, and
 * returns that. Throws a TIMEOUT ShardcronError with `describe()` once `timeoutMs` has passed.
 * Errors thrown by `check` propagate at once (a check that wants retries catches its own).
 */
export async function pollUntil<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: { timeoutMs: number; intervalMs?: number; describe: () => string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  const intervalMs = options.intervalMs ?? 50;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new ShardcronError(ErrorCodes.TIMEOUT, `Timed out after ${options.timeoutMs} ms: ${options.describe()}`, {
        timeoutMs: options.timeoutMs,
      });
    }
    await delay(Math.min(intervalMs, left));
  }
}

/**
 * Sends `request` to 127.0.0.1:`port` and returns the reply: everything until the server closes the
 * connection, or the text so far once `until(text)` holds. Rejects on connect errors and timeouts.
 */
export function tcpExchange(
  port: number,
  request: string,
  options: { timeoutMs?: number; until?: (reply: string) => boolean } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    let reply = '';
    const socket = net.connect({ port, host: LOOPBACK });
    socket.setTimeout(options.timeoutMs ?? 1_000, () => socket.destroy(new Error(`no reply from port ${port}`)));
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk: string) => {
      reply += chunk;
      if (options.until?.(reply)) { socket.destroy(); resolve(reply); }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(reply));
  });
}

/** What to run and how to tell that it is ready. */
export interface ChildServiceSpec {
  /** Used in logs and errors, e.g. `zookeeper` or `zookeeper member 2`. */
  name: string;
  command: string;
  args: readonly string[];
  cwd?: string;
  /** The port the service answers on; named in errors. */
  port: number;
  /** True once the service answers; must not throw and must time out on its own. */
  isReady(): Promise<boolean>;
  startTimeoutMs: number;
  /** Time between SIGTERM and SIGKILL in {@link ChildService.stop}; default 5000. */
  stopGraceMs?: number;
  logger: Logger;
}

/** Lines of child output kept for error messages. */
const TAIL_LINES = 40;

/**
 * One local server process: spawned so that it cannot outlive this process, started by polling its
 * readiness probe against a deadline, and stopped with SIGTERM (then SIGKILL) or killed outright.
 */
export class ChildService {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly tail: string[] = [];
  /** Set by stop() and kill(): an exit we asked for is not worth a warning. */
  private expectingExit = false;

  constructor(private readonly spec: ChildServiceSpec) {}

  /** The service's name (`zookeeper`, `redis`), for messages. */
  get name(): string { return this.spec.name; }

  /** Process id while the child runs. */
  get pid(): number | undefined { return this.child?.pid; }

  /** True from spawn until the child has exited. */
  get running(): boolean { return this.child !== undefined; }

  /** The last lines the child wrote to stdout and stderr. */
  lastOutput(): string { return this.tail.join('\n'); }

  /** Spawns the child and resolves once it is ready; rejects with SERVICE_START_FAILED otherwise. */
  async start(): Promise<void> {
    if (this.child) throw new Error(`${this.describe()} is already running (pid ${this.child.pid})`);
    const { spec } = this;
    this.tail.length = 0;
    const [command, args] = setpriv
      ? [setpriv, ['--pdeathsig', 'KILL', '--', spec.command, ...spec.args]]
      : [spec.command, [...spec.args]];
    const child = spawn(command, args, { cwd: spec.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    installExitHook();
    liveChildren.add(child);
    let failure: string | undefined;
    this.expectingExit = false;
    this.exited = new Promise((resolve) => {
      const done = (why: string) => {
        if (this.child !== child) return;
        failure = why;
        this.child = undefined;
        liveChildren.delete(child);
        const level = this.expectingExit ? 'debug' : 'warn';
        spec.logger[level]({ service: spec.name, port: spec.port, pid: child.pid }, `${spec.name} ${why}`);
        resolve();
      };
      // 'close' rather than 'exit': it comes after stdout/stderr are drained, so the tail is complete.
      child.once('close', (code, signal) => done(`exited with ${signal ?? `code ${code}`}`));
      child.once('error', (err) => done(`could not be spawned: ${err.message}`));
    });
    this.capture(child);
    spec.logger.debug({ service: spec.name, port: spec.port, pid: child.pid }, `starting ${spec.name}`);
    const started = Date.now();
    try {
      // Racing the probe with the exit: a probe of a port someone else holds may hang until its own timeout.
      const exitedFirst = this.exited.then(() => false);
      await pollUntil(() => (failure !== undefined ? this.fail(failure) : Promise.race([spec.isReady(), exitedFirst])), {
        timeoutMs: spec.startTimeoutMs,
        intervalMs: 50,
        describe: () => `${this.describe()} did not answer`,
      });
    } catch (err) {
      if (err instanceof ShardcronError && err.code === ErrorCodes.SERVICE_START_FAILED) throw err;
      await this.kill();
      this.fail(`did not answer within ${spec.startTimeoutMs} ms`, err);
    }
    spec.logger.debug({ service: spec.name, port: spec.port, ms: Date.now() - started }, `${spec.name} ready`);
  }

  /** SIGTERM (plus SIGCONT, in case a test stopped it), SIGKILL after the grace period; waits for exit. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.expectingExit = true;
    this.signal(child, 'SIGTERM');
    this.signal(child, 'SIGCONT');
    const grace = new AbortController();
    const timer = delay(this.spec.stopGraceMs ?? 5_000, undefined, { signal: grace.signal }).then(
      () => this.signal(child, 'SIGKILL'),
      () => undefined,
    );
    await this.exited;
    grace.abort();
    await timer;
  }

  /** SIGKILL now; waits for the exit. */
  async kill(): Promise<void> {
    this.expectingExit = true;
    if (this.child) this.signal(this.child, 'SIGKILL');
    await this.exited;
  }

  private signal(child: ChildProcess, signal: NodeJS.Signals): void {
    try { child.kill(signal); } catch { /* it exited meanwhile */ }
  }

  private capture(child: ChildProcess): void {
    for (const [stream, source] of [['stdout', child.stdout], ['stderr', child.stderr]] as const) {
      let partial = '';
      source?.setEncoding('utf8');
      source?.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines.filter((l) => l.trim() !== '')) {
          this.tail.push(line);
          if (this.tail.length > TAIL_LINES) this.tail.shift();
          this.spec.logger.debug({ service: this.spec.name, stream }, line);
        }
      });
    }
  }

  private describe(): string { return `${this.spec.name} on ${LOOPBACK}:${this.spec.port}`; }

  private fail(why: string, cause?: unknown): never {
    const output = this.lastOutput() || '(no output)';
    throw new ShardcronError(
      ErrorCodes.SERVICE_START_FAILED,
      `${this.describe()} failed to start: it ${why}. Last output:\n${output}`,
      { service: this.spec.name, port: this.spec.port },
      { cause },
    );
  }
}
