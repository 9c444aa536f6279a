/**
 * Where `shardcron dev` serves the console (its scheduler node has the console role): the address of
 * SHARDCRON_OPS_HOST, the port of SHARDCRON_OPS_PORT when set, else 8080 when it is free and any free
 * port when it is not (a second dev, another tool on 8080), and a token when the address is not a
 * loopback one and none is set (the console refuses such an address without one).
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { isLoopbackHost, type ShardcronEnvConfig } from '../shared/config/env-config';

/** The console dev starts, and what to print about it. */
export interface DevConsole {
  host: string;
  port: number;
  /** What a browser on this machine opens. */
  url: string;
  token?: string;
  /** True when dev made the token up (it is printed: nobody else knows it). */
  tokenGenerated: boolean;
  readToken?: string;
  /** The SHARDCRON_OPS_* variables of the node that serves it. */
  env: Record<string, string>;
}

/** Whether `port` can be bound on `host` now. */
function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A port the OS offers on `host` now. */
function anyPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Decides the console's address, port and token for dev (see the module comment). */
export async function devConsole(config: ShardcronEnvConfig, env: Record<string, string | undefined>): Promise<DevConsole> {
  const host = config.ops.host;
  let port = config.ops.port;
  if (env.SHARDCRON_OPS_PORT === undefined || env.SHARDCRON_OPS_PORT === '') {
    port = (await canBind(host, port)) ? port : await anyPort(host);
  }
  let token = config.ops.token;
  const tokenGenerated = token === undefined && !isLoopbackHost(host);
  if (tokenGenerated) token = randomBytes(24).toString('base64url');
  // A wildcard address is reached through the loopback from this machine.
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return {
    host,
    port,
    url: `http://${shown}:${port}/`,
    ...(token !== undefined && { token }),
    tokenGenerated,
    ...(config.ops.readToken !== undefined && { readToken: config.ops.readToken }),
    env: {
      SHARDCRON_OPS_HOST: host,
      SHARDCRON_OPS_PORT: String(port),
      ...(token !== undefined && { SHARDCRON_OPS_TOKEN: token }),
      ...(config.ops.readToken !== undefined && { SHARDCRON_OPS_READ_TOKEN: config.ops.readToken }),
    },
  };
}

/** The header line about the console: its URL, and how to log in when it needs a token. */
export function describeDevConsole(c: DevConsole): string {
  const login = c.token === undefined ? 'no token needed on this loopback address' : c.tokenGenerated ? `log in with the token ${c.token} (generated for this run)` : 'log in with SHARDCRON_OPS_TOKEN';
  return `${c.url}  (${login}; Bull Board ${c.url}queues, metrics ${c.url}metrics)`;
}
