/**
 * The `shardcron` binary (bin/shardcron.js calls {@link main}). One command per module under
 * src/cli; this file only dispatches and turns the command's result into the process exit code.
 */
import { runDev } from './cli/dev-command';
import { ExitCode } from './cli/exit-codes';
import { runInstances } from './cli/instances-command';
import { runItemLock } from './cli/item-lock-command';
import { processIo, type CliIo } from './cli/io';
import { runJobs } from './cli/jobs-command';
import { runPing } from './cli/ping-command';
import { runServers } from './cli/servers-command';
import { runStart } from './cli/start-command';
import { PLANNED_COMMANDS, USAGE } from './cli/usage';
import { describeEnv } from './shared/config/env-config';

/** Runs one command; resolves with its exit code. Never calls process.exit itself. */
export async function runCommand(argv: readonly string[], io: CliIo = processIo): Promise<ExitCode> {
  const [command, ...args] = argv;
  switch (command) {
    case 'start':
      return runStart(io);
    case 'dev':
      return runDev(args, io);
    case 'ping':
      return runPing(io);
    case 'jobs':
      return runJobs(args, io);
    case 'servers':
      return runServers(args, io);
    case 'instances':
      return runInstances(args, io);
    case 'item-lock':
      return runItemLock(args, io);
    case 'env':
      io.out('SHARDCRON_* environment variables (docs/configuration.md):\n');
      io.out(describeEnv());
      return ExitCode.OK;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.out(USAGE);
      return ExitCode.OK;
    default:
      if (PLANNED_COMMANDS.has(command)) {
        io.err(`shardcron ${command}: planned, not available in this version yet.\n`);
      } else {
        io.err(`shardcron: unknown command "${command}".\n`);
      }
      io.err(USAGE);
      return ExitCode.USAGE;
  }
}

/** Entry point of the binary: runs the command and exits with its code. */
export function main(argv: readonly string[]): void {
  runCommand(argv).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`shardcron: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(ExitCode.FAILURE);
    },
  );
}

if (require.main === module) main(process.argv.slice(2));
