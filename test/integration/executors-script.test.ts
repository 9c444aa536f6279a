/**
 * The SCRIPT executor with real processes: arguments that would be dangerous in a shell stay
 * inert, the ShardingContext arrives twice (last argument and environment), exit codes, signals and
 * stderr tails are reported, and a timeout or an abort leaves nothing of the script's process group
 * running, as the process table shows.
 */
import fs from 'node:fs';
import path from 'node:path';
import { makeTempDir } from '../../src/dev/child-service';
import type { ShardingContext } from '../../src/shared/config/job-definition';
import { shardingContextJson, type ScriptSpec } from '../../src/shared/config/job-type-specs';
import { ExecutionFailure } from '../../src/worker/executors/job-executor';
import { createScriptExecutor, scriptExecutor } from '../../src/worker/executors/script-executor';
import { liveProcessGroupMembers, processGroupMembers } from '../helpers/process-table';
import { eventually, waitFor } from '../helpers/services';
import { noResharding, testContext } from '../helpers/sharding-context';

const NODE = process.execPath;
/** A grace period short enough for tests; the default (2 s) is the same code path. */
const GRACE_MS = 500;
const executor = createScriptExecutor({ killGraceMs: GRACE_MS });

let dir: { root: string; remove: () => void };
beforeEach(() => {
  dir = makeTempDir('shardcron-script-');
});
afterEach(() => dir.remove());

const file = (name: string) => path.join(dir.root, name);
const run = (spec: ScriptSpec, ctx: ShardingContext = testContext()) => executor.run(spec, ctx, noResharding);

/** The ExecutionFailure `promise` must reject with. */
async function failureOf(promise: Promise<unknown>): Promise<ExecutionFailure> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof ExecutionFailure)) throw new Error(`expected an ExecutionFailure, got ${String(err)}`);
  return err;
}

/** A node program that writes what it received (argv after the script, env, cwd) as JSON to argv[1]. */
const RECORD_ARGS = `require('fs').writeFileSync(process.argv[1], JSON.stringify({
  args: process.argv.slice(2), env: process.env.SHARDCRON_SHARDING_CONTEXT, extra: process.env.EXTRA, path: process.env.PATH, cwd: process.cwd() }))`;

/**
 * A node program that starts a child ignoring SIGTERM (so only SIGKILL ends it) and sharing its
 * stdout and stderr (so the pipes stay open after the parent dies), writes both pids to argv[1],
 * and hangs.
 */
// The child writes the pids only after "child up" is on stderr: a test that acts on the pids then knows the line was written
// (a fixed wait in the parent lost that race on a loaded machine, when the child's node took longer to start).
const FORK_AND_HANG = `const { spawn } = require('child_process');
const childCode = 'process.on("SIGTERM", () => {}); setInterval(() => {}, 1000); console.error("child up"); ' +
  'require("fs").writeFileSync(process.argv[1], JSON.stringify({ parent: process.ppid, child: process.pid }))';
spawn(process.execPath, ['-e', childCode, process.argv[1]], { stdio: 'inherit' });
setInterval(() => {}, 1000);`;

/** Waits for the pids FORK_AND_HANG writes. */
async function forkedPids(pidFile: string): Promise<{ parent: number; child: number }> {
  return waitFor(() => fs.existsSync(pidFile) && (JSON.parse(fs.readFileSync(pidFile, 'utf8')) as { parent: number; child: number }), {
    timeoutMs: 15_000,
    message: 'the script to write its pids',
  });
}

/** Asserts that nothing of group `pgid` runs now, and that the table forgets it once its zombies are reaped. */
async function expectGroupGone(pgid: number): Promise<void> {
  expect(liveProcessGroupMembers(pgid)).toEqual([]);
  await eventually(() => expect(processGroupMembers(pgid)).toEqual([]), { timeoutMs: 10_000, message: 'zombies of the group reaped' });
}

describe('SCRIPT: arguments and context', () => {
  it('passes shell syntax in item parameters through verbatim: nothing is removed or created', async () => {
    fs.writeFileSync(file('x'), 'still here');
    const ctx = testContext({ shardingParameter: `; rm -rf ${file('x')}`, jobParameter: `$(touch ${file('y')}) \`touch ${file('y')}\`` });
    await expect(run({ command: [NODE, '-e', RECORD_ARGS, file('out.json')] }, ctx)).resolves.toEqual({ exitCode: 0 });
    const seen = JSON.parse(fs.readFileSync(file('out.json'), 'utf8')) as { args: string[] };
    expect(seen.args).toHaveLength(1);
    const arrived = JSON.parse(seen.args[0]!) as Record<string, unknown>;
    expect(arrived.shardingParameter).toBe(`; rm -rf ${file('x')}`);
    expect(arrived.jobParameter).toBe(`$(touch ${file('y')}) \`touch ${file('y')}\``);
    expect(fs.readFileSync(file('x'), 'utf8')).toBe('still here');
    expect(fs.existsSync(file('y'))).toBe(false);
  });

  it('gives the same JSON as the last argument and in SHARDCRON_SHARDING_CONTEXT, with env and cwd applied', async () => {
    const ctx = testContext({ shardingParameter: '北京 😀' });
    fs.mkdirSync(file('work'));
    const spec: ScriptSpec = { command: [NODE, '-e', RECORD_ARGS, file('out.json'), '--flag'], env: { EXTRA: 'from the spec' }, cwd: file('work') };
    await expect(run(spec, ctx)).resolves.toEqual({ exitCode: 0 });
    const seen = JSON.parse(fs.readFileSync(file('out.json'), 'utf8')) as { args: string[]; env: string; extra: string; path: string; cwd: string };
    expect(seen.args).toEqual(['--flag', shardingContextJson(ctx)]);
    expect(seen.env).toBe(shardingContextJson(ctx));
    expect(JSON.parse(seen.env)).toMatchObject({ jobName: 'exec-test', shardingItem: 1, shardingParameter: '北京 😀', source: 'NORMAL' });
    expect(seen.extra).toBe('from the spec');
    expect(seen.path).toBe(process.env.PATH);
    expect(fs.realpathSync(seen.cwd)).toBe(fs.realpathSync(file('work')));
  });
});

describe('SCRIPT: outcomes', () => {
  it('reports exit code 3 with the tail of stderr, bounded to 4 KB', async () => {
    const noisy = `process.stderr.write('x'.repeat(10000) + '\\nbackup failed: disk full\\n'); process.exit(3)`;
    const failure = await failureOf(run({ command: [NODE, '-e', noisy] }));
    expect(failure.report).toEqual({ exitCode: 3 });
    expect(failure.message).toMatch(new RegExp(`^script "${NODE.replace(/[/.]/g, '\\$&')}" exited with code 3; stderr \\(last 4096 bytes\\):\\nx+\\nbackup failed: disk full$`));
    expect(failure.message.length).toBeLessThan(4096 + 200);
    const short = await failureOf(run({ command: ['/bin/sh', '-c', 'echo "no such table" >&2; exit 3'] }));
    expect(short.message).toBe('script "/bin/sh" exited with code 3; stderr:\nno such table');
  });

  it('reports a death by signal', async () => {
    const failure = await failureOf(run({ command: ['/bin/sh', '-c', 'kill -KILL $$'] }));
    expect(failure.report).toEqual({ signal: 'SIGKILL' });
    expect(failure.message).toBe('script "/bin/sh" was killed by SIGKILL; no stderr output');
  });

  it('names a missing program and a missing directory', async () => {
    const missing = await failureOf(run({ command: ['shardcron-no-such-program', '--help'] }));
    expect(missing.message).toBe('script program "shardcron-no-such-program" was not found: give an absolute path, or a program on the worker\'s PATH');
    const noDir = await failureOf(run({ command: [NODE, '-e', ''], cwd: file('absent') }));
    expect(noDir.message).toBe(`script cwd ${JSON.stringify(file('absent'))} does not exist`);
  });

  it('drains a large stdout instead of blocking the script on a full pipe', async () => {
    await expect(run({ command: [NODE, '-e', `process.stdout.write('y'.repeat(5_000_000))`] })).resolves.toEqual({ exitCode: 0 });
  });

  it('ends what a script left running when it exits', async () => {
    const pidFile = file('pid');
    await expect(scriptExecutor.run({ command: ['/bin/sh', '-c', 'sleep 300 & echo $$ > "$1"; exit 0', 'sh', pidFile] }, testContext(), noResharding)).resolves.toEqual({ exitCode: 0 });
    await expectGroupGone(Number(fs.readFileSync(pidFile, 'utf8')));
  });
});

describe('SCRIPT: timeout and abort end the whole process group', () => {
  it('kills a script and the child it forked (which ignores SIGTERM) at the timeout', async () => {
    const pidFile = file('pids.json');
    const started = Date.now();
    const outcome = failureOf(run({ command: [NODE, '-e', FORK_AND_HANG, pidFile], timeoutMs: 2_500 }));
    const pids = await forkedPids(pidFile);
    expect(liveProcessGroupMembers(pids.parent).map((p) => p.pid).sort()).toEqual([pids.parent, pids.child].sort());
    const failure = await outcome;
    const tookMs = Date.now() - started;
    expect(failure.message).toMatch(/^script ".+" timed out after 2500 ms; its process group was killed; stderr:\nchild up$/);
    expect(failure.report).toEqual({ signal: 'SIGTERM' });
    // Recorded as `timeout`, as the job's own timeoutMs is.
    expect(failure.timedOut).toBe(true);
    // The timeout, then SIGTERM, then SIGKILL for the child after the grace period; not the pipes' close.
    expect(tookMs).toBeGreaterThanOrEqual(2_500 + GRACE_MS);
    expect(tookMs).toBeLessThan(2_500 + GRACE_MS + 3_000);
    await expectGroupGone(pids.parent);
  });

  it('kills a script and its child when ctx.signal aborts', async () => {
    const pidFile = file('pids.json');
    const controller = new AbortController();
    const outcome = failureOf(run({ command: [NODE, '-e', FORK_AND_HANG, pidFile] }, testContext({ signal: controller.signal })));
    const pids = await forkedPids(pidFile);
    const abortedAt = Date.now();
    controller.abort(new Error('ZooKeeper session lost'));
    const failure = await outcome;
    expect(Date.now() - abortedAt).toBeLessThan(GRACE_MS + 3_000);
    expect(failure.message).toMatch(/^script ".+" stopped: aborted \(ZooKeeper session lost\)$/);
    expect(failure.details).toMatchObject({ aborted: true, stderrTail: 'child up\n' });
    await expectGroupGone(pids.parent);
  });

  it('does not start a script when the signal has already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    const failure = await failureOf(run({ command: [NODE, '-e', RECORD_ARGS, file('out.json')] }, testContext({ signal: controller.signal })));
    expect(failure.message).toContain('stopped: aborted (shutting down)');
    expect(fs.existsSync(file('out.json'))).toBe(false);
  });
});
