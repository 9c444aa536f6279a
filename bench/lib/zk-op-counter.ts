/**
 * A TCP relay between one ZooKeeper client and the server that counts the client's requests by
 * opcode: how the console benchmark tells how many ZooKeeper reads its requests caused. Requests are
 * length-prefixed frames `len, xid, type, ...` after the connect handshake (the first frame).
 */
import net from 'node:net';
import { LOOPBACK } from '../../src/dev/free-port';

/** Read opcodes (org.apache.zookeeper.ZooDefs.OpCode): exists, getData, getACL, getChildren, getChildren2, getAllChildrenNumber. */
const READ_OPS: ReadonlySet<number> = new Set([3, 4, 6, 8, 12, 104]);

export interface ZkOpCounter {
  /** Connect the client here instead of to the server. */
  connectionString: string;
  /** Read requests the client sent so far. */
  reads(): number;
  /** Every request by opcode (pings are 11). */
  byOp(): Record<number, number>;
  close(): Promise<void>;
}

export async function startZkOpCounter(serverPort: number): Promise<ZkOpCounter> {
  const counts = new Map<number, number>();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(serverPort, LOOPBACK);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    let buffered = Buffer.alloc(0);
    let handshake = true;
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 4) {
        const end = 4 + buffered.readInt32BE(0);
        if (buffered.length < end) break;
        if (!handshake && end >= 12) {
          const op = buffered.readInt32BE(8);
          counts.set(op, (counts.get(op) ?? 0) + 1);
        }
        handshake = false;
        buffered = buffered.subarray(end);
      }
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    connectionString: `${LOOPBACK}:${port}`,
    reads: () => [...counts].reduce((n, [op, c]) => n + (READ_OPS.has(op) ? c : 0), 0),
    byOp: () => Object.fromEntries(counts),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
