/**
 * A local TCP port where a connection attempt hangs, for connect-timeout tests: a socket that
 * listens but never accepts (held by a perl process: Node accepts every connection it can), its
 * accept queue filled, so the kernel drops every further SYN and the client keeps retrying. A
 * non-routable address cannot be used for this here: outbound connections are answered by a proxy.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

const LISTEN = `use IO::Socket::INET; $| = 1;
my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die "listen: $!";
print $s->sockport, "\\n"; <STDIN>;`;

/** A port whose connections never complete, and its close(). */
export interface UnconnectablePort {
  readonly port: number;
  close(): Promise<void>;
}

/** Resolves 'connected' or 'pending' (still connecting after `ms`). */
async function tryConnect(port: number, ms: number): Promise<{ socket: net.Socket; state: 'connected' | 'pending' }> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  const connected = once(socket, 'connect').then(() => 'connected' as const);
  const pending = new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms).unref());
  return { socket, state: await Promise.race([connected, pending]) };
}

/** Starts the listener and fills its queue until a connection attempt hangs. */
export async function startUnconnectablePort(): Promise<UnconnectablePort> {
  const listener = spawn('perl', ['-e', LISTEN], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [line] = (await once(listener.stdout!, 'data')) as [Buffer];
  const port = Number(String(line).trim());
  const fillers: net.Socket[] = [];
  const close = async () => {
    for (const socket of fillers) socket.destroy();
    listener.stdin!.end();
    if (listener.exitCode === null) await once(listener, 'exit');
  };
  for (let attempt = 0; attempt < 16; attempt++) {
    const { socket, state } = await tryConnect(port, 500);
    fillers.push(socket);
    if (state === 'pending') return { port, close };
  }
  await close();
  throw new Error(`port ${port} kept accepting connections: cannot make a connect timeout here`);
}
