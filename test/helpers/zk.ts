/**
 * ZooKeeper clients for integration suites: short sessions, fast retries, unique namespaces,
 * and a recorder of connection events. Every client made here is closed by `closeZkClients`.
 */
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { ZkClient, type ZkClientOptions } from '../../src/shared/zk';
import { closeServices, startZooKeeper } from './services';

const clients = new Set<ZkClient>();
let counter = 0;

/** A namespace no other test uses. */
export function uniqueNamespace(prefix = 'test'): string {
  counter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/** Connects a client with test-friendly timings; options override them. */
export async function connectZk(connectionString: string, options: Partial<ZkClientOptions> = {}): Promise<ZkClient> {
  const client = new ZkClient({
    connectionString,
    namespace: options.namespace ?? uniqueNamespace(),
    sessionTimeoutMs: 1_500,
    connectTimeoutMs: 3_000,
    retry: { baseSleepMs: 50, maxSleepMs: 500, maxRetries: 3 },
    ...options,
  });
  clients.add(client);
  return client.start();
}

/** Closes every client made by {@link connectZk}; use in afterEach. Returns how many were open. */
export async function closeZkClients(): Promise<number> {
  const open = [...clients].filter((c) => c.state !== 'closed').length;
  await Promise.allSettled([...clients].map((c) => c.close()));
  clients.clear();
  return open;
}

/** Records the connection events a client emits, in order. */
export function recordZkEvents(client: ZkClient): string[] {
  const seen: string[] = [];
  for (const event of ['suspended', 'reconnected', 'lost', 'session:renewed'] as const) {
    client.on(event, () => seen.push(event));
  }
  return seen;
}

/**
 * For a suite that needs one ZooKeeper server and its own clients: starts the server before the
 * suite, closes the clients made by {@link connectZk} after each test and the server after the
 * suite. Call at the top of the file; read `connectionString` inside tests.
 */
export function useZooKeeperServer(): { readonly connectionString: string } {
  let server: ZooKeeperServer | undefined;
  beforeAll(async () => {
    server = await startZooKeeper();
  });
  afterEach(async () => {
    await closeZkClients();
  });
  afterAll(closeServices);
  return {
    get connectionString() {
      return server!.connectionString;
    },
  };
}
