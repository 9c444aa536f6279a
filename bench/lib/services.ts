/** Servers, ZooKeeper counters, process CPU/RSS and machine facts for the benchmarks. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { tcpExchange } from '../../src/dev/child-service';
import { RedisServer } from '../../src/dev/redis-server';
import { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { jobConfigCodec } from '../../src/shared/config/job-config';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import { ZkClient } from '../../src/shared/zk';

export interface Services {
  zk: ZooKeeperServer;
  redis: RedisServer;
  close(): Promise<void>;
}

/** A fresh ZooKeeper (given tick) and Redis on free loopback ports. */
export async function startServices(tickTimeMs: number): Promise<Services> {
  const [zk, redis] = await Promise.all([ZooKeeperServer.start({ tickTimeMs, jvm: 'server' }), RedisServer.start()]);
  return { zk, redis, close: async () => void (await Promise.allSettled([zk.close(), redis.close()])) };
}

export interface ZkCounters {
  /** Last committed zxid: +1 per write transaction (a multi is one). */
  zxid: number;
  /** Individual write ops (create/set/delete, also inside multis) under /{namespace}, from `mntr`. */
  writeOps: number;
  at: number;
}

/** Reads the zxid (`srvr`) and the per-namespace write counter (`mntr` zk_cnt_{ns}_write_per_namespace). */
export async function zkCounters(port: number, namespace: string): Promise<ZkCounters> {
  const [srvr, mntr] = await Promise.all([tcpExchange(port, 'srvr', { timeoutMs: 5_000 }), tcpExchange(port, 'mntr', { timeoutMs: 5_000 })]);
  const zxid = Number.parseInt(/Zxid: 0x([0-9a-f]+)/i.exec(srvr)?.[1] ?? '0', 16);
  const escaped = namespace.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const writeOps = Number(new RegExp(`^zk_cnt_${escaped}_write_per_namespace\\s+(\\d+)`, 'm').exec(mntr)?.[1] ?? 0);
  return { zxid, writeOps, at: Date.now() };
}

/** Calls per Redis command so far (INFO commandstats), e.g. `{ evalsha: 1200, bzpopmin: 30 }`. */
export async function redisCommandCalls(port: number): Promise<Record<string, number>> {
  const info = await tcpExchange(port, 'INFO commandstats\r\nQUIT\r\n', { until: (t) => t.includes('+OK') });
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]] = Number(m[2]);
  return calls;
}

/** The calls made between two {@link redisCommandCalls} readings, per command, busiest first. */
export function commandCallsBetween(before: Record<string, number>, after: Record<string, number>): Array<[string, number]> {
  return Object.entries(after)
    .map(([name, n]): [string, number] => [name, n - (before[name] ?? 0)])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
}

/** Calls and time per Redis command so far (INFO commandstats); a script's own commands count inside its evalsha too. */
export async function redisCommandStats(port: number): Promise<Record<string, { calls: number; usec: number }>> {
  const info = await tcpExchange(port, 'INFO commandstats\r\nQUIT\r\n', { until: (t) => t.includes('+OK') });
  const stats: Record<string, { calls: number; usec: number }> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return stats;
}

/** The `top` commands by time between two {@link redisCommandStats} readings, as `name calls / s`. */
export function busiestCommands(before: Record<string, { calls: number; usec: number }>, after: Record<string, { calls: number; usec: number }>, top = 10): string {
  return Object.entries(after)
    .map(([name, a]) => ({ name, calls: a.calls - (before[name]?.calls ?? 0), usec: a.usec - (before[name]?.usec ?? 0) }))
    .filter((c) => c.calls > 0)
    .sort((a, b) => b.usec - a.usec)
    .slice(0, top)
    .map((c) => `${c.name} ${c.calls.toLocaleString('en-US')} / ${(c.usec / 1e6).toFixed(1)} s`)
    .join('; ');
}

export interface ProcSample {
  /** utime + stime, seconds. */
  cpuSeconds: number;
  rssMb: number;
  at: number;
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time and RSS of a process from /proc (Linux). */
export function procSample(pid: number): ProcSample {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { cpuSeconds, rssMb: rssKb / 1024, at: Date.now() };
}

/**
 * What the kernel's scheduler counted for a process's threads (/proc/{pid}/task/{tid}/schedstat):
 * CPU time run, and time spent runnable but waiting for a CPU. Main thread only unless `allThreads`.
 * Undefined where the kernel does not keep these.
 */
export function schedStat(pid: number, allThreads = false): { cpuMs: number; waitMs: number } | undefined {
  try {
    const tids = allThreads ? fs.readdirSync(`/proc/${pid}/task`) : [String(pid)];
    let cpuNs = 0;
    let waitNs = 0;
    for (const tid of tids) {
      const [cpu, wait] = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      cpuNs += cpu;
      waitNs += wait;
    }
    return { cpuMs: cpuNs / 1e6, waitMs: waitNs / 1e6 };
  } catch {
    return undefined;
  }
}

/** What a ZooKeeper server holds: znodes and their data (`mntr`), its process RSS and JVM heap in use (`jcmd GC.heap_info`). */
export interface ZkFootprint {
  znodes: number;
  dataMb: number;
  rssMb: number;
  /** Heap in use (young and old generations); undefined when jcmd cannot attach. */
  heapUsedMb?: number;
}

export async function zkFootprint(port: number, pid: number): Promise<ZkFootprint> {
  const mntr = await tcpExchange(port, 'mntr', { timeoutMs: 5_000 });
  const field = (name: string) => Number(new RegExp(`^${name}\\s+(\\d+)`, 'm').exec(mntr)?.[1] ?? 0);
  let heapUsedMb: number | undefined;
  try {
    // jcmd attaches through a socket: it works although the server runs with -XX:-UsePerfData (which jstat needs).
    const info = execFileSync('jcmd', [String(pid), 'GC.heap_info'], { timeout: 15_000 }).toString();
    const used = info
      .split('\n')
      .filter((line) => /(heap|generation)\s+total/.test(line))
      .reduce((sum, line) => sum + Number(/used (\d+)K/.exec(line)?.[1] ?? 0), 0);
    if (used > 0) heapUsedMb = used / 1024;
  } catch {
    heapUsedMb = undefined;
  }
  return { znodes: field('zk_znode_count'), dataMb: field('zk_approximate_data_size') / 2 ** 20, rssMb: procSample(pid).rssMb, ...(heapUsedMb !== undefined && { heapUsedMb }) };
}

/** A ZooKeeper client for the bench itself (config edits, floor measurements). */
export function benchZkClient(connectionString: string, namespace: string): Promise<ZkClient> {
  return new ZkClient({
    connectionString,
    namespace,
    sessionTimeoutMs: 10_000,
    connectTimeoutMs: 10_000,
    retry: { baseSleepMs: 100, maxSleepMs: 1_000, maxRetries: 5 },
  }).start();
}

/** Quartz cron that fires once a day at the UTC second of `at` (the next fire is `at` itself). */
export function cronAt(at: number): string {
  const d = new Date(at);
  return `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} * * ?`;
}

/** Rewrites the cron of stored job configs, as an operator would; leader and workers watch them. */
export async function setCron(zk: ZkClient, jobs: readonly string[], cron: string): Promise<void> {
  await Promise.all(
    jobs.map(async (job) => {
      const path = registryPaths.jobConfig(job);
      const { data } = await zk.get(path);
      await zk.set(path, jobConfigCodec.encode({ ...jobConfigCodec.decode(data, path), cron }));
    }),
  );
}

/** Picks a fire time at least `leadMs` from now, on a whole second. */
export function nextWholeSecond(leadMs: number): number {
  return Math.ceil((Date.now() + leadMs) / 1000) * 1000;
}

export interface MachineInfo {
  date: string;
  cpus: number;
  cpuModel: string;
  memGiB: number;
  os: string;
  node: string;
  zookeeper: string;
  redis: string;
  bullmq: string;
  /** HEAD commit and the src/ files with uncommitted changes when the run started (other work may be in flight). */
  git: { commit: string; dirtySrc: string[] };
}

function gitState(): MachineInfo['git'] {
  const run = (args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: `${__dirname}/../..`, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trimEnd(); // not trim(): a porcelain line starts with a space
    } catch {
      return '';
    }
  };
  return { commit: run(['rev-parse', '--short', 'HEAD']) || 'unknown', dirtySrc: run(['status', '--porcelain', '--', 'src']).split('\n').filter(Boolean).map((l) => l.slice(3)) };
}

export async function machineInfo(services?: Services): Promise<MachineInfo> {
  let zookeeper = 'unknown';
  let redis = 'unknown';
  if (services) {
    // Right after start the server may answer "not currently serving requests"; ask again.
    for (let attempt = 0; attempt < 10 && zookeeper === 'unknown'; attempt += 1) {
      const reply = await tcpExchange(services.zk.port, 'srvr', { timeoutMs: 5_000 }).catch(() => '');
      zookeeper = /Zookeeper version: ([^,-]+)/.exec(reply)?.[1] ?? zookeeper;
      if (zookeeper === 'unknown') await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const info = await tcpExchange(services.redis.port, 'INFO server\r\nQUIT\r\n', { until: (t) => t.includes('+OK') }).catch(() => '');
    redis = /redis_version:(\S+)/.exec(info)?.[1] ?? redis;
  }
  let osName = `${os.type()} ${os.release()}`;
  try {
    osName = /PRETTY_NAME="([^"]+)"/.exec(fs.readFileSync('/etc/os-release', 'utf8'))?.[1] ?? osName;
  } catch {
    // not Linux
  }
  const bullmq = (require('bullmq/package.json') as { version: string }).version;
  return {
    date: new Date().toISOString(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    os: osName,
    node: process.version,
    zookeeper,
    redis,
    bullmq,
    git: gitState(),
  };
}
