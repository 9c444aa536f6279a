import { parseArgs } from 'node:util';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** The command line of an admin command: its words and the options every one of them shares. */
export interface AdminArgs {
  /** Words that are not options: the subcommand and its arguments. */
  readonly words: readonly string[];
  /** `--json`: print the console API's JSON instead of a table or a sentence. */
  readonly json: boolean;
  /** `--item I` (`jobs disable|enable`), as given. */
  readonly item: string | undefined;
  /** `--file F` (`jobs create`): a JSON file, as given. */
  readonly file: string | undefined;
  /** `--force` (`item-lock`): switch even while workers are live. */
  readonly force: boolean;
  /** `--help` / `-h`. */
  readonly help: boolean;
}

/** Parses `args`; an unknown option or a missing value is a message for the usage error. */
function parseAdminArgs(args: readonly string[]): AdminArgs | { error: string } {
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: { json: { type: 'boolean' }, item: { type: 'string' }, file: { type: 'string' }, force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    return { words: positionals, json: values.json ?? false, item: values.item, file: values.file, force: values.force ?? false, help: values.help ?? false };
  } catch (err) {
    // node:util's messages name the option ("Unknown option '--jsn'"); its advice on '--' does not apply here.
    return { error: (err as Error).message.replace(/\. To specify a positional argument.*$/s, '') };
  }
}

/** Prints `{command}: {message}` and the command's usage on stderr; exit 2. */
export function usageError(io: CliIo, command: string, message: string, usage: string): ExitCode {
  io.err(`${command}: ${message}`);
  io.err(usage);
  return ExitCode.USAGE;
}

/**
 * The command line of `command` (e.g. `shardcron jobs`), or the exit code when there is nothing more
 * to do: 0 after printing `usage` for `--help`, 2 after a usage error.
 */
export function readAdminArgs(argv: readonly string[], io: CliIo, command: string, usage: string): AdminArgs | ExitCode {
  const args = parseAdminArgs(argv);
  if ('error' in args) return usageError(io, command, args.error, usage);
  if (!args.help) return args;
  io.out(usage);
  return ExitCode.OK;
}
