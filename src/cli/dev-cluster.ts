/**
 * The node processes of `shardcron dev`: each one is `bin/shardcron.js start` with its own env, its
 * output read line by line, its exit reported, and stopped (SIGTERM, SIGKILL after a grace period)
 * or killed on demand. Spawned through `setpriv --pdeathsig KILL` where available, so they die with
 * dev even when dev itself is killed with SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { findExecutable } from '../dev/child-service';

/** One process to run. */
export interface NodeProcessSpec {
  /** Display name and instance id, e.g. `worker-2`. */
  readonly name: string;
  /** Variables added to the base environment. */
  readonly env: Readonly<Record<string, string>>;
}

/** Options of {@link DevCluster}. */
export interface DevClusterOptions {
  /** The `shardcron` binary (bin/shardcron.js). */
  bin: string;
  baseEnv: NodeJS.ProcessEnv;
  /** One line of a process's stdout or stderr. */
  onLine(name: string, line: string): void;
  /** A process exited; `expected` is false unless {@link DevCluster.stop} or {@link DevCluster.kill} asked for it. */
  onExit(name: string, pid: number | undefined, how: string, expected: boolean): void;
}

interface Managed {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  alive: boolean;
  expected: boolean;
}

const setpriv = process.platform === 'linux' ? findExecutable('setpriv') : undefined;

/** A set of `shardcron start` processes. */
export class DevCluster {
  private readonly processes: Managed[] = [];

  constructor(private readonly options: DevClusterOptions) {}

  /** Name and pid of every process started. */
  get members(): ReadonlyArray<{ name: string; pid: number | undefined }> {
    return this.processes.map((p) => ({ name: p.name, pid: p.child.pid }));
  }

  /** Spawns one node process; returns its pid. */
  start(spec: NodeProcessSpec): number | undefined {
    const args = [process.execPath, this.options.bin, 'start'];
    const [command, argv] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', ...args]] : [args[0], args.slice(1)];
    const child = spawn(command, argv, { env: { ...this.options.baseEnv, ...spec.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let managed!: Managed;
    const exited = new Promise<void>((resolve) => {
      child.once('error', (err) => {
        managed.alive = false;
        this.options.onExit(spec.name, child.pid, `could not be spawned: ${err.message}`, managed.expected);
        resolve();
      });
      // 'close' comes after the output is drained, so the last lines are printed before the exit.
      child.once('close', (code, signal) => {
        managed.alive = false;
        this.options.onExit(spec.name, child.pid, signal ? `killed by ${signal}` : `exited with code ${code}`, managed.expected);
        resolve();
      });
    });
    managed = { name: spec.name, child, exited, alive: true, expected: false };
    this.processes.push(managed);
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) readline.createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => this.options.onLine(spec.name, line));
    }
    return child.pid;
  }

  /**
   * Stops the processes, `first` ones before the rest (the scheduler before the workers, so no
   * fire lands on a worker that is leaving): SIGTERM, then SIGKILL for any still running after `graceMs`.
   */
  async stop(graceMs: number, first: (name: string) => boolean = () => false): Promise<void> {
    const live = this.processes.filter((p) => p.alive);
    await this.stopGroup(live.filter((p) => first(p.name)), graceMs);
    await this.stopGroup(live.filter((p) => !first(p.name)), graceMs);
  }

  /** SIGKILL to every process still running; waits until they are gone. */
  async kill(): Promise<void> {
    const live = this.processes.filter((p) => p.alive);
    for (const p of live) {
      p.expected = true;
      signal(p.child, 'SIGKILL');
    }
    await Promise.all(live.map((p) => p.exited));
  }

  private async stopGroup(group: Managed[], graceMs: number): Promise<void> {
    for (const p of group) {
      p.expected = true;
      signal(p.child, 'SIGTERM');
    }
    const timer = setTimeout(() => group.forEach((p) => signal(p.child, 'SIGKILL')), graceMs);
    await Promise.all(group.map((p) => p.exited));
    clearTimeout(timer);
  }
}

function signal(child: ChildProcess, name: NodeJS.Signals): void {
  try {
    child.kill(name);
  } catch {
    // exited meanwhile
  }
}
