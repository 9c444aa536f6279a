/**
 * The `shardcron` binary as a user runs it: `node <bin> ...` as a child process, configured only by
 * the SHARDCRON_* variables given (the caller's own are left out), its output collected by line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitFor } from './services';

/** The repository's own binary. */
export const BIN = path.resolve(__dirname, '..', '..', 'bin', 'shardcron.js');

export interface CliRun {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** stdout lines that are JSON. */
  json(): Array<Record<string, unknown>>;
}

/** Every run started here and every pid spawned, for a suite's cleanup and its leak check. */
export const cliRuns: CliRun[] = [];
export const cliPids: number[] = [];

/** The environment without the caller's SHARDCRON_* variables, plus `env`. */
export function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith('SHARDCRON_')));
  return { ...base, ...env };
}

/** Starts `node <bin> ...args` in `cwd` (default: the repository) with `env`. */
export function runCli(args: string[], env: Record<string, string>, options: { bin?: string; cwd?: string } = {}): CliRun {
  const bin = options.bin ?? BIN;
  const child = spawn(process.execPath, [bin, ...args], { cwd: options.cwd ?? path.dirname(path.dirname(bin)), env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const collect = (into: string[]) => {
    let partial = '';
    return (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      into.push(...lines);
    };
  };
  child.stdout.on('data', collect(stdout));
  child.stderr.on('data', collect(stderr));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const json = () =>
    stdout.flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  const r = { child, stdout, stderr, exited, json };
  cliRuns.push(r);
  if (child.pid !== undefined) cliPids.push(child.pid);
  return r;
}

/** Waits (with a deadline) for the exit code. */
export async function cliExitCode(r: CliRun, timeoutMs: number): Promise<number | null> {
  let code: number | null | undefined;
  void r.exited.then((c) => (code = c));
  await waitFor(() => code !== undefined, { timeoutMs, message: `exit of ${r.child.spawnargs.slice(2).join(' ')}; stderr: ${r.stderr.join('\n')}` });
  return code!;
}

/** Kills (SIGKILL) every run still alive and waits for it: an `afterEach`. */
export async function killCliRuns(): Promise<void> {
  for (const r of cliRuns.splice(0)) {
    if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await r.exited;
  }
}
