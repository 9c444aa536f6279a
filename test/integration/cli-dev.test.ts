/**
 * `shardcron dev` as a newcomer runs it: nothing answers at SHARDCRON_ZK / SHARDCRON_REDIS_URL, so it
 * starts its own ZooKeeper and Redis, a scheduler and workers; the human log shows every example
 * job running; Ctrl-C (SIGINT) stops it all and leaves no process, port or temp dir behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isListening } from '../../src/cli/service-probe';
import { getFreePorts } from '../../src/dev/free-port';
import { isProcessAlive, waitFor } from '../helpers/services';

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin', 'shardcron.js');
const EXAMPLE_JOBS = ['settle-accounts', 'failover-demo', 'heartbeat'];

interface Dev {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
  text(): string;
}

const started: Dev[] = [];
let tmp: string;

function dev(args: string[], env: Record<string, string>): Dev {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toUpperCase().startsWith('SHARDCRON_')));
  // Its own TMPDIR, so the test can tell that every temp dir dev (and src/dev) made is gone.
  const child = spawn(process.execPath, [BIN, 'dev', ...args], { cwd: ROOT, env: { ...base, TMPDIR: tmp, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  let partial = '';
  const collect = (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    output.push(...lines);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const d = { child, output, exited, text: () => output.join('\n') };
  started.push(d);
  return d;
}

/** Like waitFor, and a timeout shows dev's output as it was then. */
async function waitForOutput<T>(d: Dev, predicate: () => T, what: string, timeoutMs: number) {
  return waitFor(predicate, { timeoutMs, intervalMs: 200, message: what }).catch((err: Error) => {
    throw new Error(`${err.message}; output of shardcron dev:\n${d.text()}`);
  });
}

async function exitCode(d: Dev, timeoutMs: number): Promise<number | null> {
  let code: number | null | undefined;
  void d.exited.then((c) => (code = c));
  await waitForOutput(d, () => code !== undefined, 'shardcron dev to exit', timeoutMs);
  return code!;
}

/** Entries of the test's TMPDIR that shardcron made (tsx keeps its compile cache there too). */
const leftovers = () => fs.readdirSync(tmp).filter((name) => name.startsWith('shardcron-'));

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-cli-dev-test-'));
});

afterEach(async () => {
  for (const d of started.splice(0)) {
    if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill('SIGKILL');
    await d.exited;
  }
});

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

it('starts servers and nodes, shows every example job running, and Ctrl-C leaves nothing behind', async () => {
  const [zkPort, redisPort] = await getFreePorts(2);
  const launched = Date.now();
  const d = dev(['--workers', '2'], { SHARDCRON_ZK: `127.0.0.1:${zkPort}`, SHARDCRON_REDIS_URL: `redis://127.0.0.1:${redisPort}` });

  const firstRuns = await waitForOutput(
    d,
    () => {
      const found = EXAMPLE_JOBS.map((job) => d.output.find((line) => new RegExp(`\\d\\d:\\d\\d:\\d\\d  ${job} +item \\d/\\d.*  ran on worker-\\d  \\d+ ms`).test(line)));
      return found.every(Boolean) ? (found as string[]) : undefined;
    },
    'every example job to run',
    60_000,
  );
  const ready = Date.now() - launched;

  const text = d.text();
  expect(text).toContain(`zookeeper  127.0.0.1:${zkPort}  (started here, pid`);
  expect(text).toContain(`redis      redis://127.0.0.1:${redisPort}  (started here, pid`);
  expect(text).toMatch(/namespace  dev /);
  // The console: its URL, served by the scheduler, answering the API with the example jobs and their instances.
  const consoleUrl = /console +(http:\/\/127\.0\.0\.1:\d+\/) +\(no token needed on this loopback address/.exec(text)?.[1];
  expect(consoleUrl).toBeDefined();
  await waitForOutput(d, () => d.output.some((line) => line.includes(`scheduler-1 serves the console at ${consoleUrl!.slice(0, -1)}`)), 'the console to listen', 10_000);
  const jobs = (await (await fetch(`${consoleUrl}api/jobs`)).json()) as { jobs: Array<{ name: string; instances: number }> };
  expect(jobs.jobs.map((j) => j.name).sort()).toEqual([...EXAMPLE_JOBS].sort());
  const instances = (await (await fetch(`${consoleUrl}api/instances`)).json()) as { instances: Array<{ instanceId: string }> };
  expect(instances.instances.map((i) => i.instanceId)).toEqual(['worker-1', 'worker-2']);
  expect((await fetch(consoleUrl!)).status).toBe(200);
  const consolePort = Number(new URL(consoleUrl!).port);
  expect(text).toMatch(/stop +Ctrl-C stops everything started here/);
  expect(text).toMatch(/processes +scheduler-1 pid \d+, worker-1 pid \d+, worker-2 pid \d+/);
  expect(text).toMatch(/scheduler-1 is the leader now/);
  for (const line of firstRuns) expect(line).toMatch(/first run, started \d+\.\d s after launch/);
  const dataDir = /data +(\S+) +\(removed on stop\)/.exec(text)?.[1];
  expect(dataDir && fs.existsSync(dataDir)).toBe(true);
  // Every pid dev printed before the log began: supervisor, ZooKeeper, Redis, scheduler, workers.
  const header = text.slice(0, text.indexOf('\n\n'));
  const pids = [d.child.pid!, ...[...header.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]))];
  expect(pids).toHaveLength(1 + 1 + 2 + 3);
  expect(pids.every(isProcessAlive)).toBe(true);
  expect(await isListening('127.0.0.1', zkPort)).toBe(true);
  expect(await isListening('127.0.0.1', redisPort)).toBe(true);
  process.stdout.write(`shardcron dev: every example job ran ${ready} ms after launch\n${firstRuns.join('\n')}\n`);

  d.child.kill('SIGINT');
  expect(await exitCode(d, 30_000)).toBe(0);
  expect(d.text()).toMatch(/stopped; nothing started by shardcron dev is left running$/);
  expect(d.text()).not.toMatch(/unexpectedly/);
  expect(pids.filter(isProcessAlive)).toEqual([]);
  expect(await isListening('127.0.0.1', zkPort)).toBe(false);
  expect(await isListening('127.0.0.1', redisPort)).toBe(false);
  expect(await isListening('127.0.0.1', consolePort)).toBe(false);
  expect(fs.existsSync(dataDir!)).toBe(false);
  expect(leftovers()).toEqual([]);
});

/**
 * A PATH with java and setpriv but no redis-server, and an apt-get that logs its arguments and
 * "installs" redis-server by linking the real one in: the fresh-machine path, without touching the system.
 */
function pathWithoutRedis(): { bin: string; aptLog: string } {
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-cli-dev-path-'));
  const aptLog = path.join(bin, 'apt-get.log');
  for (const tool of ['java', 'setpriv']) {
    const found = (process.env.PATH ?? '').split(':').map((dir) => path.join(dir, tool)).find((file) => fs.existsSync(file));
    if (found) fs.symlinkSync(found, path.join(bin, tool));
  }
  const realRedis = (process.env.PATH ?? '').split(':').map((dir) => path.join(dir, 'redis-server')).find((file) => fs.existsSync(file));
  fs.writeFileSync(
    path.join(bin, 'apt-get'),
    `#!/bin/sh\necho "$DEBIAN_FRONTEND $*" >> ${JSON.stringify(aptLog)}\n` +
      `if [ "$1" = install ]; then ${JSON.stringify(fs.existsSync('/bin/ln') ? '/bin/ln' : '/usr/bin/ln')} -s ${JSON.stringify(realRedis)} ${JSON.stringify(path.join(bin, 'redis-server'))}; fi\n`,
    { mode: 0o755 },
  );
  return { bin, aptLog };
}

const asRoot = process.getuid?.() === 0 ? it : it.skip;

asRoot('as root, installs a missing redis-server with apt-get, then runs', async () => {
  const { bin, aptLog } = pathWithoutRedis();
  try {
    const [zkPort, redisPort] = await getFreePorts(2);
    const d = dev(['--workers', '1'], { PATH: bin, SHARDCRON_ZK: `127.0.0.1:${zkPort}`, SHARDCRON_REDIS_URL: `redis://127.0.0.1:${redisPort}` });
    await waitForOutput(d, () => d.output.some((line) => / heartbeat +item 0\/1  ran on worker-1 /.test(line)), 'heartbeat to run after the install', 60_000);
    expect(d.text()).toContain('redis-server not installed: installing redis-server with apt-get (pass --no-install to refuse)\n$ apt-get update\n$ apt-get install -y redis-server');
    expect(fs.readFileSync(aptLog, 'utf8')).toBe('noninteractive update\nnoninteractive install -y redis-server\n');
    d.child.kill('SIGINT');
    expect(await exitCode(d, 30_000)).toBe(0);
    expect(await isListening('127.0.0.1', redisPort)).toBe(false);
  } finally {
    fs.rmSync(bin, { recursive: true, force: true });
  }
});

it('with --no-install and a missing redis-server, prints what is missing and how to install it, and exits 1', async () => {
  const [zkPort, redisPort] = await getFreePorts(2);
  const d = dev(['--no-install'], {
    SHARDCRON_ZK: `127.0.0.1:${zkPort}`,
    SHARDCRON_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    SHARDCRON_REDIS_SERVER: '/nonexistent/redis-server',
  });
  expect(await exitCode(d, 30_000)).toBe(1);
  const text = d.text();
  expect(text).toContain('redis-server is needed (nothing answers at the configured address) but not installed');
  expect(text).toContain('Cannot start a local Redis: SHARDCRON_REDIS_SERVER=/nonexistent/redis-server is not an executable file.');
  expect(text).toContain('apt-get update && apt-get install -y redis-server');
  expect(await isListening('127.0.0.1', zkPort)).toBe(false);
  expect(leftovers()).toEqual([]);
});

it('--ha: an ensemble and a Sentinel group; kill -9 a ZooKeeper server and the Redis primary, the jobs go on; Ctrl-C leaves nothing behind', async () => {
  const d = dev(['--ha', '--workers', '2'], {});
  const ranAll = (from: number) => EXAMPLE_JOBS.every((job) => d.output.slice(from).some((line) => new RegExp(`  ${job} +item \\d/\\d.*  ran on worker-\\d `).test(line)));
  await waitForOutput(d, () => ranAll(0), 'every example job to run', 90_000);
  const text = d.text();
  const header = text.slice(0, text.indexOf('\n\n'));
  const servers = [...header.matchAll(/^ {4}(server \d|primary|replica|sentinel \d) +127\.0\.0\.1:(\d+) +pid (\d+)$/gm)].map((m) => ({ name: m[1], port: Number(m[2]), pid: Number(m[3]) }));
  expect(servers.map((s) => s.name)).toEqual(['server 1', 'server 2', 'server 3', 'primary', 'replica', 'sentinel 1', 'sentinel 2', 'sentinel 3']);
  expect(header).toMatch(/zookeeper +127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+ +\(ensemble of 3 started here/);
  expect(header).toMatch(/redis +primary mymaster via Sentinels 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+/);
  const zkServer = servers[0];
  const primary = servers.find((s) => s.name === 'primary')!;
  expect(header).toContain(`kill -9 ${zkServer.pid} (a ZooKeeper server), or kill -9 ${primary.pid} (the Redis primary)`);
  const pids = [d.child.pid!, ...[...header.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]))];
  expect(pids.every(isProcessAlive)).toBe(true);

  const before = d.output.length;
  process.kill(zkServer.pid, 'SIGKILL');
  process.kill(primary.pid, 'SIGKILL');
  const killedAt = Date.now();
  await waitForOutput(d, () => d.output.slice(before).some((line) => /the Sentinels promoted redis 127\.0\.0\.1:\d+ \(pid \d+\) to primary/.test(line)), 'the promotion to be reported', 30_000);
  await waitForOutput(d, () => ranAll(d.output.findIndex((line, i) => i >= before && /the Sentinels promoted/.test(line))), 'every example job to run after the kills', 30_000);
  process.stdout.write(`shardcron dev --ha: every example job ran again ${Date.now() - killedAt} ms after killing ZooKeeper server 1 and the Redis primary\n`);
  expect(d.text()).not.toMatch(/(scheduler|worker)-\d \(pid \d+\) .* unexpectedly/);

  d.child.kill('SIGINT');
  expect(await exitCode(d, 30_000)).toBe(0);
  expect(d.text()).toMatch(/stopped; nothing started by shardcron dev is left running$/);
  expect(pids.filter(isProcessAlive)).toEqual([]);
  for (const s of servers) expect(await isListening('127.0.0.1', s.port)).toBe(false);
  expect(leftovers()).toEqual([]);
});
