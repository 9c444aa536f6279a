/**
 * A worker joining a running namespace: `N=10000 npx tsx bench/tools/worker-join.ts [DIST...]` (each
 * DIST a built dist/ directory; default this checkout's, after `npm run build`). For each DIST, on its
 * own ZooKeeper and Redis: worker-1 registers N one-item hourly jobs plus 100 jobs of 4 items firing
 * every second, a scheduler-only process leads, and once the every-second jobs run, worker-2 starts
 * with the same jobs. Prints how long worker-2 took to register and to start its first item (the
 * leader gives it items of the every-second jobs at their next fire after it joined).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { readFileSync } from 'node:fs';
import { runTool } from '../lib/tool';

/** RSS of `pid` in MB (VmRSS from /proc). */
function rssMb(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb ?? 0) / 1024);
}

/** CPU milliseconds of `pid` so far (utime + stime from /proc, 100 ticks a second). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const N = Number(process.env.N ?? 10_000);

const NODE = `
const { defineJob, startNode } = require(process.argv[1]);
(async () => {
  const n = Number(process.argv[2]);
  const say = (m) => process.send && process.send(m);
  const hourly = Array.from({ length: n }, (_, i) => defineJob({ name: 'h' + i, cron: '0 0 * * * ?', monitorExecution: false, execute: async () => {} }));
  const everySecond = Array.from({ length: 100 }, (_, i) => defineJob({ name: 's' + i, cron: '* * * * * ?', shardingTotalCount: 4, execute: async () => say({ type: 'start', at: Date.now() }) }));
  const roles = process.env.SHARDCRON_ROLES.split(',');
  const profile = process.env.JOIN_PROFILE;
  let session;
  if (profile) {
    session = new (require('node:inspector').Session)();
    session.connect();
    await new Promise((r) => session.post('Profiler.enable', () => session.post('Profiler.start', r)));
  }
  // LEADER_PROFILE: the tool asks the leader for a CPU profile of the join ('profile' messages).
  process.on('message', (m) => {
    if (m.type !== 'profile') return;
    const inspector = require('node:inspector');
    if (!m.file) {
      globalThis.__join = new inspector.Session();
      globalThis.__join.connect();
      globalThis.__join.post('Profiler.enable', () => globalThis.__join.post('Profiler.start'));
    } else {
      const session = globalThis.__join;
      session.post('Profiler.stop', (err, { profile: p }) => {
        require('node:fs').writeFileSync(m.file, JSON.stringify(p));
        session.disconnect();
      });
    }
  });
  const started = Date.now();
  await startNode({ roles, jobs: roles.includes('worker') ? [...hourly, ...everySecond] : [], concurrency: 200 });
  say({ type: 'ready', ms: Date.now() - started });
  if (session) session.post('Profiler.stop', (err, { profile: p }) => require('node:fs').writeFileSync(profile, JSON.stringify(p)));
})();`;

function spawnNode(dist: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['-e', NODE, dist, String(N)], { env: { PATH: process.env.PATH, SHARDCRON_LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

const next = (child: ChildProcess, type: string): Promise<{ type: string; ms?: number; at?: number }> =>
  new Promise((resolve, reject) => {
    const onMessage = (m: { type: string }) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`a node exited with ${code}`)));
  });

async function measure(dist: string): Promise<string> {
  const zk = await ZooKeeperServer.start({ jvm: 'server', maxHeapMb: Number(process.env.ZK_HEAP_MB ?? 2048) });
  const redis = await RedisServer.start();
  const base = { SHARDCRON_ZK: zk.connectionString, SHARDCRON_REDIS_URL: redis.url, SHARDCRON_NAMESPACE: 'join' };
  const children: ChildProcess[] = [];
  try {
    const first = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: 'worker-1' });
    children.push(first);
    const firstReady = await next(first, 'ready');
    const leader = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'scheduler', SHARDCRON_INSTANCE_ID: 'leader-1' });
    children.push(leader);
    await next(first, 'start');
    // A new leader lays out the items of every job that never fired (a write per item): wait until
    // it is done (under a fifth of a core over 2 s, at most 3 minutes), so the join is measured alone.
    for (let waited = 0; waited < 180_000; waited += 2_000) {
      const before = cpuMs(leader.pid);
      await new Promise((r) => setTimeout(r, 2_000));
      if (cpuMs(leader.pid) - before < 400) break;
    }
    // What the cluster spends without a join, for comparison: 10 s of the every-second jobs running.
    // STEADY_PROFILE=dir: CPU profiles of the leader and worker-1 over those 10 s.
    const steady = process.env.STEADY_PROFILE && path.resolve(process.env.STEADY_PROFILE);
    if (steady) for (const child of [leader, first]) child.send({ type: 'profile' });
    const base0 = { leader: cpuMs(leader.pid), zk: cpuMs(zk.pid), worker1: cpuMs(first.pid) };
    await new Promise((r) => setTimeout(r, 10_000));
    if (steady) {
      leader.send({ type: 'profile', file: path.join(steady, 'leader-steady.cpuprofile') });
      first.send({ type: 'profile', file: path.join(steady, 'worker1-steady.cpuprofile') });
      await new Promise((r) => setTimeout(r, 2_000));
    }
    const baseline = `CPU per 10 s before it: leader ${cpuMs(leader.pid) - base0.leader} ms, ZooKeeper ${cpuMs(zk.pid) - base0.zk} ms, worker-1 ${cpuMs(first.pid) - base0.worker1} ms`;
    const leaderProfile = process.env.LEADER_PROFILE && path.resolve(process.env.LEADER_PROFILE);
    if (leaderProfile) leader.send({ type: 'profile' });
    const t0 = Date.now();
    const cpuBefore = { leader: cpuMs(leader.pid), zk: cpuMs(zk.pid), worker1: cpuMs(first.pid) };
    // JOIN_PROFILE=file.cpuprofile: a CPU profile of worker-2 from its start to its registration.
    const second = spawnNode(dist, { ...base, SHARDCRON_ROLES: 'worker', SHARDCRON_INSTANCE_ID: 'worker-2', ...(process.env.JOIN_PROFILE && { JOIN_PROFILE: path.resolve(process.env.JOIN_PROFILE) }) });
    children.push(second);
    const firstItem = next(second, 'start');
    const ready = await next(second, 'ready');
    const item = await firstItem;
    if (leaderProfile) {
      leader.send({ type: 'profile', file: leaderProfile });
      await new Promise((r) => setTimeout(r, 2_000));
    }
    const cpu = `CPU until it had registered and run its first item: worker-2 ${cpuMs(second.pid)} ms, leader ${cpuMs(leader.pid) - cpuBefore.leader} ms, ZooKeeper ${cpuMs(zk.pid) - cpuBefore.zk} ms, worker-1 ${cpuMs(first.pid) - cpuBefore.worker1} ms (${baseline})`;
    // What a worker does after it is registered (its config watches, its server nodes): until it is
    // quiet, under a fifth of a core over 2 s (at most 3 minutes).
    let quietAt = Date.now();
    for (let waited = 0; waited < 180_000; waited += 2_000) {
      const before = cpuMs(second.pid);
      await new Promise((r) => setTimeout(r, 2_000));
      quietAt = Date.now();
      if (cpuMs(second.pid) - before < 400) break;
    }
    const settled = `worker-2 quiet ${quietAt - t0} ms after it was spawned (CPU by then: worker-2 ${cpuMs(second.pid)} ms, leader ${cpuMs(leader.pid) - cpuBefore.leader} ms, ZooKeeper ${cpuMs(zk.pid) - cpuBefore.zk} ms)`;
    const rss = `RSS now: leader ${rssMb(leader.pid)} MB, worker-1 ${rssMb(first.pid)} MB, worker-2 ${rssMb(second.pid)} MB`;
    return `${dist}: worker-1 registered in ${firstReady.ms} ms; worker-2 joined: registered in ${ready.ms} ms, first item started ${(item.at ?? 0) - t0} ms after it was spawned; ${cpu}; ${settled}; ${rss}`;
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await zk.stop();
    await redis.stop();
  }
}

async function main(): Promise<void> {
  const dists = process.argv.slice(2).map((d) => path.resolve(d));
  for (const dist of dists.length > 0 ? dists : [path.join(__dirname, '..', '..', 'dist')]) process.stdout.write(`${await measure(dist)}\n`);
}

runTool(main);
