/**
 * The example jobs that `shardcron dev` runs (docs/examples.md). A jobs module: its default export
 * is an array of defineJob(...) results; `SHARDCRON_JOBS=examples/jobs.ts shardcron start` loads it.
 * In your own project, import from 'shardcron' instead of '../src'.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob } from '../src';
import { settleAccounts } from './settle-accounts';

export default [
  // A sharded batch job: every 5 s, 3 items settle a third of the accounts each.
  defineJob({
    name: 'settle-accounts',
    cron: '0/5 * * * * ?',
    shardingTotalCount: 3,
    shardingItemParameters: '0=A,1=B,2=C',
    description: 'Settles the pending amounts of the accounts whose id % 3 is this item',
    execute: settleAccounts,
  }),

  // Failover: kill a worker while its items sleep, and the survivors run them again (source FAILOVER).
  defineJob({
    name: 'failover-demo',
    cron: '0/3 * * * * ?',
    shardingTotalCount: 4,
    failover: true,
    async execute(ctx) {
      // Passing the signal makes the sleep stop at once when this worker loses ZooKeeper or shuts down.
      await sleep(1_500, undefined, { signal: ctx.signal });
    },
  }),

  // The smallest job there is: one item, every second.
  defineJob({
    name: 'heartbeat',
    cron: '* * * * * ?',
    execute(ctx) {
      ctx.log.debug('beat');
    },
  }),
];
