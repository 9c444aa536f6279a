/**
 * A TCP relay in front of a real server that counts round trips: a client's request that follows
 * the server's answer starts a new round trip; what a client sends before any answer (a pipeline,
 * however the kernel splits it) belongs to the same one. Answers can be held (a server that stops
 * answering while its connections stay open) and released in order.
 */
import net from 'node:net';
import { LOOPBACK } from '../../src/dev/free-port';

export interface RoundTripRelay {
  /** The port clients connect to instead of the server's. */
  port: number;
  /** Round trips counted on every connection so far. */
  roundTrips(): number;
  /** From now on, the server's answers wait in the relay. */
  holdAnswers(): void;
  /** Delivers the held answers, in order, and stops holding. */
  releaseAnswers(): void;
  close(): Promise<void>;
}

export async function startRoundTripRelay(targetPort: number): Promise<RoundTripRelay> {
  let roundTrips = 0;
  /** While answers are held: each one with the client it goes to. */
  let held: Array<{ client: net.Socket; chunk: Buffer }> | undefined;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: LOOPBACK, port: targetPort });
    let answered = true;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('data', (chunk) => {
      if (answered) roundTrips++;
      answered = false;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      answered = true;
      if (held) held.push({ client, chunk });
      else client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    roundTrips: () => roundTrips,
    holdAnswers: () => {
      held ??= [];
    },
    releaseAnswers: () => {
      const answers = held ?? [];
      held = undefined;
      for (const { client, chunk } of answers) if (!client.destroyed) client.write(chunk);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
