import { ErrorCodes, ShardcronError } from '../shared/errors';
import type { ChildService } from './child-service';

/**
 * What a local server process (ZooKeeper, Redis) offers tests and `shardcron dev`: fault
 * injection (stop, kill, restart on the same port) and an idempotent close that removes its temp
 * dirs. Subclasses add how to reach it (`connectionString`, `url`).
 */
export abstract class LocalServer {
  private closing: Promise<void> | undefined;

  protected constructor(
    /** TCP port (the client port for ZooKeeper). */
    readonly port: number,
    protected readonly child: ChildService,
    private readonly removeTemp: () => void,
  ) {}

  /** Process id while the server runs. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** True while the process runs (it may not answer yet, or be SIGSTOPped). */
  get running(): boolean {
    return this.child.running;
  }

  /** Fault injection: SIGTERM, then SIGKILL after the grace period. Keeps the port (and ZooKeeper's data). */
  stop(): Promise<void> {
    return this.child.stop();
  }

  /** Fault injection: SIGKILL now. Keeps the port. */
  kill(): Promise<void> {
    return this.child.kill();
  }

  /** Stops the server if it runs, starts it again on the same port, and waits until it answers. */
  async restart(): Promise<void> {
    if (this.closing) throw new ShardcronError(ErrorCodes.CLOSED, `${this.child.name} on port ${this.port} is closed`);
    await this.child.stop();
    await this.child.start();
  }

  /** Stops the server and removes its temp dirs; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  /** Same as {@link close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Starts the child; on failure closes (removing temp dirs) and rethrows. */
  protected async boot(): Promise<this> {
    try {
      await this.child.start();
    } catch (err) {
      await this.close();
      throw err;
    }
    return this;
  }

  private async doClose(): Promise<void> {
    try {
      await this.child.stop();
    } finally {
      this.removeTemp();
    }
  }
}
