/**
 * Scenario 7, the console: `GET /api/jobs` and `GET /api/jobs/:name` on a namespace of 1,000 jobs
 * while the cluster fires (a leader and two workers in their own processes; 20 of the jobs fire
 * every second with 4 items each, the rest once a day), answered one at a time by a console-only
 * node in this process. Its ZooKeeper traffic goes through a relay that counts read requests; a
 * second console node, the control, warmed the same way and sent no request in the measured window,
 * goes through another. Both see the same watch notifications and read what they announce, so the
 * difference of their reads is what the requests themselves caused.
 */
import path from 'node:path';
import pino from 'pino';
import type * as Shardcron from '../../src';
import type { BenchContext } from '../lib/context';
import { ProcessGroup, SHARDCRON_CODE, spawnShardcron, type ShardcronJobGroup } from '../lib/procs';
import { startServices } from '../lib/services';
import { nowMs, sleep, summarize, waitUntil, type Summary } from '../lib/stats';
import { startZkOpCounter, type ZkOpCounter } from '../lib/zk-op-counter';

export interface ConsoleBenchResult {
  jobs: number;
  firingJobs: number;
  itemsPerFiringJob: number;
  /** `GET /api/jobs`, sequential, whole body read (ms). */
  listJobs: Summary;
  /** `GET /api/jobs/:name` over `detailJobs` names in turn, each read once before the window (ms). */
  getJob: Summary;
  detailJobs: number;
  listBytes: number;
  windowS: number;
  /** Fires the leader dispatched during the window. */
  firesInWindow: number;
  zkReads: {
    /** The measured console's read requests during the window, and the control's in the same window. */
    measured: number;
    control: number;
    perRequest: number;
    /** Reads of the measured console's first `GET /api/jobs/:name` of each detail job (item watches), before the window. */
    firstDetailReads: number;
    /** Reads of the measured console's start (the client's and the read model's: every job's nodes), before anything was asked. */
    start: number;
  };
}

const TOKEN = 'bench-console-token-0123456789';
const JOBS = 1_000;
const FIRING = 20;
const ITEMS = 4;

async function timed(url: string): Promise<{ ms: number; bytes: number; status: number }> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  const body = await res.arrayBuffer();
  return { ms: performance.now() - t, bytes: body.byteLength, status: res.status };
}

export async function runConsole(ctx: BenchContext): Promise<ConsoleBenchResult> {
  const requests = ctx.mode === 'quick' ? 1_000 : 3_000;
  const services = await startServices(2_000);
  const group = new ProcessGroup();
  const namespace = ctx.unique('console');
  const counters: ZkOpCounter[] = [];
  const nodes: Shardcron.ShardcronNode[] = [];
  try {
    const jobs: ShardcronJobGroup[] = [
      { prefix: 'busy-', count: FIRING, cron: '* * * * * ?', items: ITEMS, sleepMs: 5 },
      { prefix: 'daily-', count: JOBS - FIRING, cron: '0 0 3 * * ?' },
    ];
    const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace };
    ctx.log(`console: 2 workers registering ${JOBS} jobs, then a leader`);
    await Promise.all(['w1', 'w2'].map((id) => spawnShardcron(group, { ...base, instanceId: id, roles: 'worker', jobs }, 180_000)));
    const leader = await spawnShardcron(group, { ...base, instanceId: 'leader', roles: 'scheduler', events: ['fire'] }, 120_000);

    // The console runs the same code as the other processes (dist/ unless BENCH_SHARDCRON_CODE=src).
    const { startNode } = require(path.join(__dirname, '..', '..', SHARDCRON_CODE)) as typeof Shardcron;
    const startConsole = async (id: string) => {
      const counter = await startZkOpCounter(services.zk.port);
      counters.push(counter);
      const node = await startNode({ env: {}, roles: ['console'], instanceId: id, zk: counter.connectionString, namespace, redisUrl: services.redis.url, ops: { host: '127.0.0.1', port: 0, token: TOKEN }, logger: pino({ level: 'silent' }) });
      nodes.push(node);
      return { node, counter, url: node.console!.url };
    };
    const measured = await startConsole('console-measured');
    const control = await startConsole('console-control');
    const startReads = measured.counter.reads();
    await waitUntil(async () => {
      const res = await fetch(`${measured.url}/api/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const { jobs: listed } = (await res.json()) as { jobs: Array<{ name: string; instances: number; nextFireTime: number | null }> };
      return listed.length === JOBS && listed.every((j) => j.instances === 2);
    }, 60_000, `${JOBS} jobs with 2 instances each in the console`, 200);

    // Every detail job read once on both consoles: its item watches are loaded (a first read costs reads).
    const detailNames = [...Array.from({ length: FIRING }, (_, i) => `busy-${i}`), ...Array.from({ length: 80 }, (_, i) => `daily-${i * 12}`)];
    const beforeFirst = measured.counter.reads();
    for (const name of detailNames) {
      await timed(`${measured.url}/api/jobs/${name}`);
      await timed(`${control.url}/api/jobs/${name}`);
    }
    const firstDetailReads = measured.counter.reads() - beforeFirst;
    for (let i = 0; i < 200; i += 1) await timed(`${measured.url}/api/jobs`); // warm-up: JIT, connections
    await sleep(1_000);

    ctx.log(`console: ${requests} GET /api/jobs and ${requests} GET /api/jobs/:name, one at a time, while ${FIRING} jobs x ${ITEMS} items fire every second`);
    const readsBefore = { measured: measured.counter.reads(), control: control.counter.reads() };
    const firesBefore = leader.messages.filter((m) => m.type === 'fire').length;
    const t0 = nowMs();
    const list: number[] = [];
    const detail: number[] = [];
    let listBytes = 0;
    for (let i = 0; i < requests; i += 1) {
      const a = await timed(`${measured.url}/api/jobs`);
      if (a.status !== 200) throw new Error(`GET /api/jobs answered ${a.status}`);
      list.push(a.ms);
      listBytes = a.bytes;
      const b = await timed(`${measured.url}/api/jobs/${detailNames[i % detailNames.length]}`);
      if (b.status !== 200) throw new Error(`GET /api/jobs/:name answered ${b.status}`);
      detail.push(b.ms);
    }
    // Reads a notification of the window's last moment announced are answered within a round trip.
    await sleep(200);
    const windowS = (nowMs() - t0) / 1000;
    const reads = { measured: measured.counter.reads() - readsBefore.measured, control: control.counter.reads() - readsBefore.control };
    const firesInWindow = leader.messages.filter((m) => m.type === 'fire').length - firesBefore;
    return {
      jobs: JOBS,
      firingJobs: FIRING,
      itemsPerFiringJob: ITEMS,
      listJobs: summarize(list),
      getJob: summarize(detail),
      detailJobs: detailNames.length,
      listBytes,
      windowS: Math.round(windowS * 10) / 10,
      firesInWindow,
      zkReads: {
        ...reads,
        perRequest: Math.max(0, reads.measured - reads.control) / (2 * requests),
        firstDetailReads,
        start: startReads,
      },
    };
  } finally {
    await Promise.allSettled(nodes.map((n) => n.close()));
    await Promise.allSettled(counters.map((c) => c.close()));
    await group.close();
    await services.close();
  }
}
