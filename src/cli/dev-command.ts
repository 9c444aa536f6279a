/**
 * `shardcron dev [--workers N] [--no-install] [--ha]`: a local cluster on this machine.
 *
 * Two processes: this one, in the terminal's foreground, and a supervisor it starts in a process
 * group of its own, which starts the servers and the nodes. Ctrl-C sends SIGINT to the whole
 * foreground group; if ZooKeeper, Redis and the nodes were in it they would all stop at once, the
 * servers first, and the nodes would hang on their way out. So only this process gets Ctrl-C and
 * forwards it as SIGTERM; the supervisor then stops the nodes, then the servers, in order.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { findExecutable } from '../dev/child-service';
import { parseDevArgs } from './dev-options';
import { runDevSupervisor } from './dev-supervisor';
import { ExitCode } from './exit-codes';
import { SHARDCRON_BIN } from './package-root';
import type { CliIo } from './io';

/** Runs `shardcron dev`; resolves with the exit code once everything it started is gone. */
export async function runDev(args: readonly string[], io: CliIo): Promise<ExitCode> {
  const options = parseDevArgs(args);
  if ('error' in options) {
    io.err(`shardcron dev: ${options.error}\nUsage: shardcron dev [--workers N] [--no-install] [--ha]`);
    return ExitCode.USAGE;
  }
  if (options.launchedAt !== undefined) return runDevSupervisor({ ...options, launchedAt: options.launchedAt }, io);
  return runFront(args);
}

/** Starts the supervisor in its own process group and relays stop signals to it. */
function runFront(args: readonly string[]): Promise<ExitCode> {
  const launchedAt = Math.round(performance.timeOrigin);
  const argv = [SHARDCRON_BIN, 'dev', ...args, `--supervised=${launchedAt}`];
  // If this process dies without a word (SIGKILL), the supervisor gets SIGTERM and cleans up.
  const setpriv = process.platform === 'linux' ? findExecutable('setpriv') : undefined;
  const [command, commandArgs] = setpriv ? [setpriv, ['--pdeathsig', 'TERM', '--', process.execPath, ...argv]] : [process.execPath, argv];
  const child = spawn(command, commandArgs, { detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
  const forward = () => {
    try {
      child.kill('SIGTERM');
    } catch {
      // gone already
    }
  };
  // SIGHUP: the terminal went away; stop as for Ctrl-C.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, forward);
  return new Promise((resolve) => {
    child.once('error', (err) => {
      process.stderr.write(`shardcron dev: could not start its supervisor: ${err.message}\n`);
      resolve(ExitCode.FAILURE);
    });
    child.once('exit', (code) => resolve(code === ExitCode.OK || code === ExitCode.USAGE ? code : ExitCode.FAILURE));
  });
}
