/**
 * StandbyReads against a real ZooKeeper: a value read ahead is current until it changes; a change
 * makes it stale at once; a job that fires rarely has its stale values read again, one that fires
 * often keeps them stale for the takeover; clear() forgets all of it for good.
 */
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { StandbyReads } from '../../src/leader/standby-reads';
import { createLogger } from '../../src/shared/logger';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { closeServices, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let server: ZooKeeperServer;
let zk: ZkClient;
let writer: ZkClient;

beforeAll(async () => {
  server = await startZooKeeper();
});
afterAll(closeServices);
beforeEach(async () => {
  zk = await connectZk(server.connectionString);
  writer = await connectZk(server.connectionString, { namespace: zk.options.namespace });
});
afterEach(closeZkClients);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const OFTEN = new Set(['often']);
const reads = () => new StandbyReads(zk, createLogger({ level: 'silent' }), (job) => OFTEN.has(job), 200);

async function writeLedger(job: string, text: string): Promise<void> {
  const path = registryPaths.leaderFire(job);
  if (await writer.exists(path)) await writer.set(path, text);
  else {
    await writer.ensurePath(path.slice(0, path.lastIndexOf('/')));
    await writer.create(path, text);
  }
}

describe('StandbyReads (real ZooKeeper)', () => {
  it('a job without a ledger or failover intents reads as such; their creation makes both stale, and a rare job reads them again', async () => {
    const r = reads();
    await r.read('rare');
    expect(r.facts('rare')).toEqual({ ledger: null, noIntents: true, laidOut: 0 });

    await writeLedger('rare', 'first');
    await writer.ensurePath(registryPaths.leaderFailoverItems('rare'));
    await writer.create(registryPaths.leaderFailoverItem('rare', 0), '{}');
    await waitFor(() => r.facts('rare').ledger === undefined && !r.facts('rare').noIntents, { message: 'both stale' });
    // Read again after the refresh delay: the ledger is current again, the intents are there.
    await waitFor(() => r.facts('rare').ledger === 'first', { message: 'the ledger read again' });
    expect(r.facts('rare').noIntents).toBe(false);

    // The intent goes: the list is empty again, and read as such.
    await writer.delete(registryPaths.leaderFailoverItem('rare', 0));
    await waitFor(() => r.facts('rare').noIntents, { message: 'no intents again' });
    await writeLedger('rare', 'second');
    await waitFor(() => r.facts('rare').ledger === 'second', { message: 'the second ledger' });
  });

  it('a job that fires often keeps a changed ledger stale for the takeover, at the cost of one notification', async () => {
    await writeLedger('often', 'first');
    const r = reads();
    await r.read('often');
    expect(r.facts('often')).toEqual({ ledger: 'first', noIntents: true, laidOut: 0 });
    await writeLedger('often', 'second');
    await waitFor(() => r.facts('often').ledger === undefined, { message: 'stale' });
    await sleep(600); // three refresh delays
    expect(r.facts('often').ledger).toBeUndefined();
  });

  it('clear() and forget() drop what was read; a notification that comes later brings nothing back', async () => {
    await writeLedger('rare', 'first');
    await writeLedger('gone', 'first');
    const r = reads();
    await r.read('rare');
    await r.read('gone');
    r.forget('gone');
    expect(r.facts('gone')).toEqual({ ledger: undefined, noIntents: false, laidOut: 0 });
    r.clear();
    expect(r.facts('rare')).toEqual({ ledger: undefined, noIntents: false, laidOut: 0 });
    await writeLedger('rare', 'second');
    await sleep(600);
    expect(r.facts('rare')).toEqual({ ledger: undefined, noIntents: false, laidOut: 0 });
    expect(r.currentLedgers).toBe(0);
  });

  it('a job that never fired: how many item nodes it has is read with its absent ledger, so that a takeover lays out only jobs missing some', async () => {
    for (const item of [0, 1, 2]) await writer.ensurePath(registryPaths.shardingItem('laid', item));
    const r = reads();
    await r.read('laid');
    await r.read('bare');
    expect(r.facts('laid')).toEqual({ ledger: null, noIntents: true, laidOut: 3 });
    expect(r.facts('bare')).toEqual({ ledger: null, noIntents: true, laidOut: 0 });
    r.forget('laid');
    expect(r.facts('laid').laidOut).toBe(0);
  });
});
