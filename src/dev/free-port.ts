import net from 'node:net';
import { ErrorCodes, ShardcronError } from '../shared/errors';

/** Loopback address every local service binds to. */
export const LOOPBACK = '127.0.0.1';

/**
 * Ports this process has already handed out. The OS may give the same ephemeral port again once
 * the probe socket is closed, and a service started from an earlier port may not be listening yet;
 * remembering them keeps two services of one test run from racing for the same port.
 */
const handedOut = new Set<number>();

/** How many times a port the OS offers may turn out to be one we already handed out. */
const MAX_ATTEMPTS_PER_PORT = 20;

function listenOnFreePort(): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host: LOOPBACK, exclusive: true }, () => resolve(server));
  });
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * Returns `count` distinct TCP ports that were free on 127.0.0.1 a moment ago and that this process
 * has not handed out before. All probe sockets stay open until every port is chosen, so the OS
 * cannot offer the same port twice within one call.
 *
 * A port is only reserved by convention: another process may still take it before the caller binds.
 */
export async function getFreePorts(count: number): Promise<number[]> {
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`getFreePorts: count must be a positive integer, got ${count}`);
  }
  const held: net.Server[] = [];
  const ports: number[] = [];
  try {
    let attempts = 0;
    while (ports.length < count) {
      if (attempts++ > count * MAX_ATTEMPTS_PER_PORT) {
        throw new ShardcronError(
          ErrorCodes.SERVICE_START_FAILED,
          `Could not find ${count} free loopback ports after ${attempts - 1} attempts; ` +
            'is the ephemeral port range exhausted?',
          { count },
        );
      }
      const server = await listenOnFreePort();
      held.push(server);
      const address = server.address();
      if (address === null || typeof address === 'string') continue;
      if (handedOut.has(address.port)) continue;
      ports.push(address.port);
    }
  } finally {
    await Promise.all(held.map(closeServer));
  }
  for (const port of ports) handedOut.add(port);
  return ports;
}

/** Returns one free loopback TCP port; see {@link getFreePorts}. */
export async function getFreePort(): Promise<number> {
  const [port] = await getFreePorts(1);
  return port;
}
