/** `shardcron servers disable|enable IP`: switch a server off or on in every job that has it. */
import { readAdminArgs, usageError } from './admin-args';
import { jsonLines } from './admin-output';
import { withAdmin } from './admin-session';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** Usage of `shardcron servers`; kept in step with docs/cli.md. */
export const SERVERS_USAGE = 'Usage: shardcron servers disable|enable IP [--json]';

/** Runs `shardcron servers ...`: exit 0 done, 1 failure, 2 bad usage, 3 no job has that server. */
export async function runServers(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = readAdminArgs(argv, io, 'shardcron servers', SERVERS_USAGE);
  if (typeof args === 'number') return args;
  const [word, ip, ...extra] = args.words;
  if (word !== 'disable' && word !== 'enable') {
    return usageError(io, 'shardcron servers', word === undefined ? 'a subcommand is required' : `unknown subcommand "${word}"`, SERVERS_USAGE);
  }
  const label = `shardcron servers ${word}${ip === undefined ? '' : ` ${ip}`}`;
  if (ip === undefined || extra.length > 0) return usageError(io, label, 'takes exactly one server IP', SERVERS_USAGE);
  if (args.item !== undefined) return usageError(io, label, '--item goes with jobs disable and enable only', SERVERS_USAGE);
  if (args.force) return usageError(io, label, '--force goes with item-lock only', SERVERS_USAGE);
  const disabled = word === 'disable';
  return withAdmin(io, label, async (admin) => {
    const result = disabled ? await admin.disableServer(ip) : await admin.enableServer(ip);
    if (args.json) {
      jsonLines({ ...result, disabled }).forEach((line) => io.out(line));
      return ExitCode.OK;
    }
    const verb = disabled ? 'disabled' : 'enabled';
    const unchanged = result.jobs.filter((job) => !result.changed.includes(job));
    io.out(`Server ${ip} ${verb} in ${result.jobs.length} job(s): ${result.jobs.join(', ')}.`);
    if (unchanged.length > 0) io.out(`It already was ${verb} in: ${unchanged.join(', ')}.`);
    return ExitCode.OK;
  });
}
