/** `shardcron instances`: the live worker instances of the namespace and their jobs. */
import { readAdminArgs, usageError } from './admin-args';
import { instanceLines, jsonLines, problemLines } from './admin-output';
import { withAdmin } from './admin-session';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** Usage of `shardcron instances`; kept in step with docs/cli.md. */
export const INSTANCES_USAGE = 'Usage: shardcron instances [--json]';

/** Runs `shardcron instances`: exit 0 done, 1 failure, 2 bad usage. */
export async function runInstances(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = readAdminArgs(argv, io, 'shardcron instances', INSTANCES_USAGE);
  if (typeof args === 'number') return args;
  if (args.words.length > 0 || args.item !== undefined || args.force) return usageError(io, 'shardcron instances', 'takes no arguments', INSTANCES_USAGE);
  return withAdmin(io, 'shardcron instances', async (admin) => {
    const instances = await admin.listInstances();
    (args.json ? jsonLines({ instances }) : instanceLines(instances, admin.namespace)).forEach((line) => io.out(line));
    problemLines(admin.problems()).forEach((line) => io.err(line));
    return ExitCode.OK;
  });
}
