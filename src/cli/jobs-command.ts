/** `shardcron jobs list|show|create|trigger|disable|enable|remove`: the admin layer's job operations. */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseItemNumber, type Admin } from '../admin';
import { ConfigError } from '../shared/errors';
import { assertJobName } from '../shared/registry/registry-paths';
import { readAdminArgs, usageError, type AdminArgs } from './admin-args';
import { jobDetailLines, jobListLines, jsonLines, problemLines } from './admin-output';
import { withAdmin } from './admin-session';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';

/** Usage of `shardcron jobs`; kept in step with docs/cli.md. */
export const JOBS_USAGE = `Usage: shardcron jobs list [--json]
       shardcron jobs show NAME [--json]
       shardcron jobs create --file JOB.json [--json]
       shardcron jobs trigger NAME [--json]
       shardcron jobs disable|enable NAME [--item I] [--json]
       shardcron jobs remove NAME [--json]`;

const SUBCOMMANDS = ['list', 'show', 'create', 'trigger', 'disable', 'enable', 'remove'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];

/** Who triggers, kept in the request: `cli:user@host` (the user may be unknown in a container). */
function requester(): string {
  let user = 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // No passwd entry for this uid (a container): keep "unknown".
  }
  return `cli:${user}@${os.hostname()}`.slice(0, 200);
}

/** Prints every line. */
const print = (io: CliIo, lines: readonly string[]) => lines.forEach((line) => io.out(line));

/** Unreadable nodes the read found, on stderr: the answer is complete without them. */
function warnProblems(io: CliIo, admin: Admin): void {
  for (const line of problemLines(admin.problems())) io.err(line);
}

async function list(admin: Admin, io: CliIo, json: boolean): Promise<ExitCode> {
  const jobs = await admin.listJobs();
  print(io, json ? jsonLines({ jobs }) : jobListLines(jobs, admin.namespace));
  warnProblems(io, admin);
  return ExitCode.OK;
}

async function show(admin: Admin, io: CliIo, job: string, json: boolean): Promise<ExitCode> {
  const detail = await admin.getJob(job);
  print(io, json ? jsonLines(detail) : jobDetailLines(detail));
  warnProblems(io, admin);
  return ExitCode.OK;
}

async function toggle(admin: Admin, io: CliIo, job: string, args: AdminArgs, disabled: boolean): Promise<ExitCode> {
  const verb = disabled ? 'disabled' : 'enabled';
  if (args.item !== undefined) {
    const item = parseItemNumber(args.item, '--item');
    const { changed } = disabled ? await admin.disableItem(job, item) : await admin.enableItem(job, item);
    print(io, args.json ? jsonLines({ job, item, disabled, changed }) : [changed ? `Item ${item} of job ${job} ${verb}.` : `Item ${item} of job ${job} was already ${verb}.`]);
    return ExitCode.OK;
  }
  const { changed } = disabled ? await admin.disableJob(job) : await admin.enableJob(job);
  print(io, args.json ? jsonLines({ job, disabled, changed }) : [changed ? `Job ${job} ${verb}.` : `Job ${job} was already ${verb}.`]);
  return ExitCode.OK;
}

async function remove(admin: Admin, io: CliIo, job: string, json: boolean): Promise<ExitCode> {
  const result = await admin.removeJob(job);
  print(io, json ? jsonLines(result) : [`Job ${job} removed: ${result.zookeeperNodes} ZooKeeper nodes, ${result.removedRequests} queued requests.`]);
  if (result.lockedRequests.length === 0) return ExitCode.OK;
  io.err(`shardcron jobs remove ${job}: ${result.lockedRequests.length} request(s) still being run by a worker were not removed; run the command again once they have finished:`);
  for (const { queue, id } of result.lockedRequests) io.err(`  ${queue}  ${id}`);
  return ExitCode.FAILURE;
}

/** Reads `--file` as JSON before anything connects; a message for the usage error when it cannot be. */
function readJobFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read --file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`--file ${file} is not JSON: ${(err as Error).message}`);
  }
}

async function create(admin: Admin, io: CliIo, body: unknown, args: AdminArgs): Promise<ExitCode> {
  const config = await admin.createJob(body, { requestedBy: requester(), subject: `jobs create --file ${args.file}` });
  print(io, args.json ? jsonLines({ name: config.name, config }) : [`Job ${config.name} created (${config.type}); workers started with SHARDCRON_WORKER_GENERIC run it.`]);
  return ExitCode.OK;
}

function run(admin: Admin, io: CliIo, subcommand: Subcommand, job: string, args: AdminArgs, body: unknown): Promise<ExitCode> {
  switch (subcommand) {
    case 'create':
      return create(admin, io, body, args);
    case 'list':
      return list(admin, io, args.json);
    case 'show':
      return show(admin, io, job, args.json);
    case 'trigger':
      return admin.trigger(job, { requestedBy: requester() }).then(({ requestId }) => {
        print(io, args.json ? jsonLines({ requestId }) : [`Job ${job} triggered: request ${requestId}.`]);
        return ExitCode.OK;
      });
    case 'disable':
    case 'enable':
      return toggle(admin, io, job, args, subcommand === 'disable');
    case 'remove':
      return remove(admin, io, job, args.json);
  }
}

/** Runs `shardcron jobs ...`: exit 0 done, 1 failure, 2 bad usage, 3 job or item not found. */
export async function runJobs(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const args = readAdminArgs(argv, io, 'shardcron jobs', JOBS_USAGE);
  if (typeof args === 'number') return args;
  const [word, job, ...extra] = args.words;
  const subcommand = SUBCOMMANDS.find((s) => s === word);
  if (!subcommand) return usageError(io, 'shardcron jobs', word === undefined ? 'a subcommand is required' : `unknown subcommand "${word}"`, JOBS_USAGE);
  const label = `shardcron jobs ${subcommand}${job === undefined ? '' : ` ${job}`}`;
  const nameless = subcommand === 'list' || subcommand === 'create';
  if (nameless ? job !== undefined : job === undefined || extra.length > 0) {
    return usageError(io, label, nameless ? 'takes no job name' : 'takes exactly one job name', JOBS_USAGE);
  }
  if ((args.file !== undefined) !== (subcommand === 'create')) {
    return usageError(io, label, subcommand === 'create' ? '--file is required: a JSON file with the job\'s config' : '--file goes with create only', JOBS_USAGE);
  }
  if (args.item !== undefined && subcommand !== 'disable' && subcommand !== 'enable') return usageError(io, label, '--item goes with disable and enable only', JOBS_USAGE);
  if (args.force) return usageError(io, label, '--force goes with item-lock only', JOBS_USAGE);
  // Bad input is refused before connecting to anything.
  let body: unknown;
  try {
    if (job !== undefined) assertJobName(job, 'NAME');
    if (args.item !== undefined) parseItemNumber(args.item, '--item');
    if (args.file !== undefined) body = readJobFile(args.file);
  } catch (err) {
    if (!(err instanceof ConfigError) && args.file === undefined) throw err;
    return usageError(io, label, (err as Error).message, JOBS_USAGE);
  }
  // `show` needs one job, not the whole namespace loaded.
  return withAdmin(io, label, (admin) => run(admin, io, subcommand, job ?? '', args, body), job !== undefined ? { jobs: [job] } : undefined);
}
