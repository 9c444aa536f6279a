import { runCommand } from '../../src/cli';
import { DEFAULT_WORKERS, MAX_WORKERS, parseDevArgs } from '../../src/cli/dev-options';
import type { CliIo } from '../../src/cli/io';
import { ENV_VARIABLES } from '../../src/shared/config/env-config';

function fakeIo(env: NodeJS.ProcessEnv = {}): CliIo & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, env, out: (l) => void stdout.push(l), err: (l) => void stderr.push(l) };
}

describe('shardcron help, env and unknown commands', () => {
  it.each([[[]], [['help']], [['--help']]])('%j prints the usage and exits 0', async (argv) => {
    const io = fakeIo();
    expect(await runCommand(argv, io)).toBe(0);
    const text = io.stdout.join('\n');
    const commands = ['start', 'dev [--workers N] [--no-install] [--ha]', 'ping', 'env', 'jobs list', 'jobs show NAME', 'jobs create --file JOB.json', 'jobs trigger NAME', 'jobs disable|enable NAME [--item I]', 'jobs remove NAME', 'servers disable|enable IP', 'instances', 'help'];
    for (const command of commands) expect(text).toContain(`  ${command}`);
    expect(text).not.toContain('Planned');
    expect(text).toContain('3 job, item or server not found');
  });

  it('an unknown command prints the usage to stderr and exits 2', async () => {
    const io = fakeIo();
    expect(await runCommand(['strat'], io)).toBe(2);
    expect(io.stderr[0]).toBe('shardcron: unknown command "strat".\n');
    expect(io.stderr.join('\n')).toContain('Usage: shardcron <command>');
    expect(io.stdout).toEqual([]);
  });

  // Bad usage is refused before anything connects: no server runs here.
  it.each([
    [['jobs'], /^shardcron jobs: a subcommand is required$/],
    [['jobs', 'lst'], /^shardcron jobs: unknown subcommand "lst"$/],
    [['jobs', 'list', 'extra'], /^shardcron jobs list extra: takes no job name$/],
    [['jobs', 'show'], /^shardcron jobs show: takes exactly one job name$/],
    [['jobs', 'show', 'a', 'b'], /^shardcron jobs show a: takes exactly one job name$/],
    [['jobs', 'show', '../etc'], /^shardcron jobs show \.\.\/etc: Invalid job name:\n  - NAME: "\.\.\/etc" is not a valid job name/],
    [['jobs', 'disable', 'billing', '--item', 'x'], /^shardcron jobs disable billing: Invalid sharding item:\n  - --item: "x" is not a sharding item number/],
    [['jobs', 'disable', 'billing', '--item=-1'], /^shardcron jobs disable billing: Invalid sharding item:\n  - --item: "-1" is not a sharding item number/],
    [['jobs', 'disable', 'billing', '--item'], /^shardcron jobs: Option '--item <value>' argument missing$/],
    [['jobs', 'trigger', 'billing', '--item', '1'], /^shardcron jobs trigger billing: --item goes with disable and enable only$/],
    [['jobs', 'list', '--jsn'], /^shardcron jobs: Unknown option '--jsn'$/],
    [['jobs', 'create'], /^shardcron jobs create: --file is required: a JSON file with the job's config$/],
    [['jobs', 'create', 'nightly', '--file', 'job.json'], /^shardcron jobs create nightly: takes no job name$/],
    [['jobs', 'trigger', 'billing', '--file', 'job.json'], /^shardcron jobs trigger billing: --file goes with create only$/],
    [['jobs', 'create', '--file', '/nonexistent/job.json'], /^shardcron jobs create: cannot read --file \/nonexistent\/job\.json: ENOENT$/],
    [['jobs', 'create', '--file', __filename], /^shardcron jobs create: --file .*cli-commands\.test\.ts is not JSON: /],
    [['servers', 'disable'], /^shardcron servers disable: takes exactly one server IP$/],
    [['servers', 'stop', '10.0.0.1'], /^shardcron servers: unknown subcommand "stop"$/],
    [['instances', 'all'], /^shardcron instances: takes no arguments$/],
    [['instances', '--force'], /^shardcron instances: takes no arguments$/],
    [['servers', 'disable', '10.0.0.1', '--force'], /^shardcron servers disable 10\.0\.0\.1: --force goes with item-lock only$/],
    [['jobs', 'disable', 'billing', '--force'], /^shardcron jobs disable billing: --force goes with item-lock only$/],
    [['item-lock', 'sometimes'], /^shardcron item-lock sometimes: unknown lock "sometimes": expected lease or per-run$/],
    [['item-lock', 'lease', 'per-run'], /^shardcron item-lock lease: takes at most one lock name and --force$/],
    [['item-lock', '--force'], /^shardcron item-lock: --force goes with a lock name$/],
  ])('%j is bad usage: exit 2 with the reason and the usage', async (argv, reason) => {
    const io = fakeIo();
    expect(await runCommand(argv, io)).toBe(2);
    expect(io.stderr[0]).toMatch(reason);
    expect(io.stderr[1]).toMatch(/^Usage: shardcron (jobs|servers|instances|item-lock)/);
    expect(io.stdout).toEqual([]);
  });

  it.each([['jobs'], ['servers'], ['instances'], ['item-lock']])('%s --help prints its usage and exits 0', async (command) => {
    const io = fakeIo();
    expect(await runCommand([command, '--help'], io)).toBe(0);
    expect(io.stdout[0]).toMatch(new RegExp(`^Usage: shardcron ${command}`));
  });

  it('an admin command with an invalid environment names every bad variable and exits 2', async () => {
    const io = fakeIo({ SHARDCRON_ZK: 'nohost', SHARDCRON_LOG_LEVEL: 'loud' });
    expect(await runCommand(['jobs', 'list'], io)).toBe(2);
    const text = io.stderr.join('\n');
    expect(text).toMatch(/^shardcron jobs list: Invalid shardcron environment/);
    for (const name of ['SHARDCRON_ZK', 'SHARDCRON_LOG_LEVEL']) expect(text).toContain(`- ${name}:`);
  });

  it('env prints the table of every variable', async () => {
    const io = fakeIo();
    expect(await runCommand(['env'], io)).toBe(0);
    const text = io.stdout.join('\n');
    expect(text).toContain('| Variable | Default | Description |');
    for (const variable of ENV_VARIABLES) expect(text).toContain(`| \`${variable.name}\` |`);
  });

  it('ping with an invalid environment names every bad variable and exits 2', async () => {
    const io = fakeIo({ SHARDCRON_ZK: 'nohost', SHARDCRON_REDIS_URL: 'http://x', SHARDCRON_ROLE: 'worker' });
    expect(await runCommand(['ping'], io)).toBe(2);
    const text = io.stderr.join('\n');
    for (const name of ['SHARDCRON_ZK', 'SHARDCRON_REDIS_URL', 'SHARDCRON_ROLE']) expect(text).toContain(`- ${name}:`);
  });

  it('dev with bad options exits 2 with a usage line', async () => {
    const io = fakeIo();
    expect(await runCommand(['dev', '--workers', '0'], io)).toBe(2);
    expect(io.stderr.join('\n')).toMatch(/--workers "0": expected an integer from 1 to 16\nUsage: shardcron dev/);
  });
});

describe('parseDevArgs', () => {
  it('defaults to 3 workers with installs allowed', () => {
    expect(parseDevArgs([])).toEqual({ workers: DEFAULT_WORKERS, noInstall: false, ha: false });
  });

  it('reads --workers N, --workers=N, -w N, --no-install and --ha', () => {
    expect(parseDevArgs(['--workers', '2', '--no-install'])).toEqual({ workers: 2, noInstall: true, ha: false });
    expect(parseDevArgs(['--workers=5'])).toEqual({ workers: 5, noInstall: false, ha: false });
    expect(parseDevArgs(['-w', '1', '--ha'])).toEqual({ workers: 1, noInstall: false, ha: true });
  });

  it.each([['--workers', 'x'], ['--workers', '1.5'], ['--workers', String(MAX_WORKERS + 1)], ['--verbose'], ['extra']])('refuses %j', (...args) => {
    expect(parseDevArgs(args)).toHaveProperty('error');
  });
});
