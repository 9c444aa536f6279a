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
    for (const command of ['start', 'dev [--workers N] [--no-install] [--ha]', 'ping', 'env', 'help']) expect(text).toContain(`  ${command}`);
    expect(text).toMatch(/Planned \(not available yet\):\n\s+jobs list\|show\|trigger\|disable\|enable\|remove NAME[\s\S]*instances/);
  });

  it('an unknown command prints the usage to stderr and exits 2', async () => {
    const io = fakeIo();
    expect(await runCommand(['strat'], io)).toBe(2);
    expect(io.stderr[0]).toBe('shardcron: unknown command "strat".\n');
    expect(io.stderr.join('\n')).toContain('Usage: shardcron <command>');
    expect(io.stdout).toEqual([]);
  });

  it('a planned command says it is not available yet and exits 2', async () => {
    const io = fakeIo();
    expect(await runCommand(['jobs', 'list'], io)).toBe(2);
    expect(io.stderr[0]).toMatch(/shardcron jobs: planned, not available in this version yet/);
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
