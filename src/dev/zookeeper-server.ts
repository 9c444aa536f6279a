import fs from 'node:fs';
import path from 'node:path';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import { LocalServer } from './local-server';
import { ChildService, findExecutable, makeTempDir, tcpExchange } from './child-service';
import { getFreePort, getFreePorts, LOOPBACK } from './free-port';

/** Where the Java runtime and the ZooKeeper jars are. */
export interface ZooKeeperInstallation {
  java: string;
  /** Java classpath with ZooKeeper and a logging binding (the conf dir is prepended at start). */
  classpath: string;
}

/** Debian's `zookeeper` package; its jar's manifest names the other jars it needs. */
const DEBIAN_ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';
/** slf4j binding so that ZooKeeper's own log goes through our quiet log4j.properties. */
const DEBIAN_LOG_JARS = ['/usr/share/java/slf4j-log4j12.jar', '/usr/share/java/log4j-1.2.jar'];

/**
 * Finds Java and ZooKeeper. Overrides: `SHARDCRON_JAVA` (the java executable) and
 * `SHARDCRON_ZK_CLASSPATH` (a classpath holding ZooKeeper, e.g. `/opt/zookeeper/lib/*`).
 * Throws a MISSING_DEPENDENCY ShardcronError naming what is missing and how to install it.
 */
export function findZooKeeper(env: NodeJS.ProcessEnv = process.env): ZooKeeperInstallation {
  const problems: string[] = [];
  const javaName = env.SHARDCRON_JAVA || (env.JAVA_HOME ? path.join(env.JAVA_HOME, 'bin', 'java') : 'java');
  const java = findExecutable(javaName, env);
  if (!java) {
    problems.push(env.SHARDCRON_JAVA
      ? `SHARDCRON_JAVA=${env.SHARDCRON_JAVA} is not an executable file`
      : `no java executable found (looked for ${javaName}${env.JAVA_HOME ? '' : ' on PATH'})`);
  }
  let classpath: string;
  if (env.SHARDCRON_ZK_CLASSPATH) {
    classpath = env.SHARDCRON_ZK_CLASSPATH;
    for (const entry of classpath.split(path.delimiter)) {
      const target = entry.endsWith('*') ? path.dirname(entry) : entry;
      if (!fs.existsSync(target)) problems.push(`SHARDCRON_ZK_CLASSPATH entry ${entry} does not exist`);
    }
  } else {
    classpath = [DEBIAN_ZOOKEEPER_JAR, ...DEBIAN_LOG_JARS.filter((jar) => fs.existsSync(jar))].join(path.delimiter);
    if (!fs.existsSync(DEBIAN_ZOOKEEPER_JAR)) problems.push(`ZooKeeper is not installed (${DEBIAN_ZOOKEEPER_JAR} not found)`);
  }
  if (problems.length > 0 || !java) {
    throw new ShardcronError(
      ErrorCodes.MISSING_DEPENDENCY,
      `Cannot start a local ZooKeeper: ${problems.join('; ')}. ` +
        'Install it with `apt-get update && apt-get install -y zookeeper`; ZooKeeper 3.8 needs Java 17 ' +
        '(`apt-get install -y openjdk-17-jre-headless`). Or point SHARDCRON_JAVA and SHARDCRON_ZK_CLASSPATH ' +
        'at an existing installation.',
      { problems },
    );
  }
  return { java, classpath };
}

const LOG4J = [
  'log4j.rootLogger=WARN, STDERR',
  'log4j.appender.STDERR=org.apache.log4j.ConsoleAppender',
  'log4j.appender.STDERR.Target=System.err',
  'log4j.appender.STDERR.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.STDERR.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n',
].join('\n');
/** ZooKeeper 3.8 tarballs log through logback instead of log4j; keep those quiet too. */
const LOGBACK = `<configuration><appender name="E" class="ch.qos.logback.core.ConsoleAppender">
<target>System.err</target><encoder><pattern>%d %-5level [%thread] %logger{0}: %msg%n</pattern></encoder>
</appender><root level="WARN"><appender-ref ref="E"/></root></configuration>`;

/** Timing options shared by a standalone server and an ensemble. */
export interface ZooKeeperTimingOptions {
  /** ZooKeeper tick; default 2000. Tests use ~200 so that 1-2 s sessions can be negotiated. */
  tickTimeMs?: number;
  /** Default 2 ticks. */
  minSessionTimeoutMs?: number;
  /** Default 60000. */
  maxSessionTimeoutMs?: number;
  logger?: Logger;
  /** How long a start may take before it fails; default 30000. */
  startTimeoutMs?: number;
  /** Environment read by {@link findZooKeeper}; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /**
   * `quick-start` (default): the JVM compiles with C1 only and a serial GC, which starts in a
   * fraction of the time and suits tests and `shardcron dev`. `server`: the JVM's default compilers,
   * as a production ZooKeeper runs; C1-only code costs several times more CPU per request under
   * sustained load, so benchmarks use this.
   */
  jvm?: 'quick-start' | 'server';
  /** The JVM's maximum heap in MB; default 256 (`quick-start`) or 512 (`server`). A namespace of 100,000 jobs holds about a million znodes. */
  maxHeapMb?: number;
  /** The largest packet the server accepts (`jute.maxbuffer`); default ZooKeeper's, 1 MB less one byte. */
  juteMaxBufferBytes?: number;
}

/** Writes zoo.cfg and the logging config into `dir`; returns the zoo.cfg path. */
function writeConfig(dir: string, options: ZooKeeperTimingOptions, settings: Record<string, string | number>): string {
  const tick = options.tickTimeMs ?? 2_000;
  const cfg: Record<string, string | number> = {
    tickTime: tick,
    minSessionTimeout: options.minSessionTimeoutMs ?? 2 * tick,
    maxSessionTimeout: options.maxSessionTimeoutMs ?? 60_000,
    clientPortAddress: LOOPBACK,
    'admin.enableServer': 'false',
    '4lw.commands.whitelist': 'ruok,srvr,mntr,stat',
    // Local throwaway data: page cache survives a killed JVM, and fsync makes a 2-core box crawl.
    forceSync: 'no',
    preAllocSize: 4096,
    ...settings,
  };
  const file = path.join(dir, 'zoo.cfg');
  fs.writeFileSync(file, Object.entries(cfg).map(([key, value]) => `${key}=${value}\n`).join(''));
  fs.writeFileSync(path.join(dir, 'log4j.properties'), `${LOG4J}\n`);
  fs.writeFileSync(path.join(dir, 'logback.xml'), `${LOGBACK}\n`);
  return file;
}

function javaArgs(install: ZooKeeperInstallation, confDir: string, mainClass: string, cfg: string, options: ZooKeeperTimingOptions): string[] {
  const classpath = [confDir, install.classpath].join(path.delimiter);
  const heap = `-Xmx${options.maxHeapMb ?? (options.jvm === 'server' ? 512 : 256)}m`;
  const tuning = options.jvm === 'server' ? [heap] : [heap, '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];
  const jute = options.juteMaxBufferBytes === undefined ? [] : [`-Djute.maxbuffer=${options.juteMaxBufferBytes}`];
  return [...tuning, ...jute, '-XX:-UsePerfData', '-cp', classpath, mainClass, cfg];
}

/** A ZooKeeper server's role as `srvr` reports it; `down` when it does not answer or does not serve. */
export type ZooKeeperMode = 'leader' | 'follower' | 'standalone' | 'down';

/** Asks the server on `port` for its mode with the `srvr` four-letter command. */
export async function zooKeeperMode(port: number): Promise<ZooKeeperMode> {
  const reply = await tcpExchange(port, 'srvr').catch(() => '');
  const mode = /^Mode: (leader|follower|standalone)$/m.exec(reply)?.[1];
  return (mode as ZooKeeperMode | undefined) ?? 'down';
}

/** Options of {@link ZooKeeperServer.start}. */
export interface ZooKeeperServerOptions extends ZooKeeperTimingOptions {
  /** Client port; 0 or absent picks a free one. */
  port?: number;
  /** Data directory kept after close; absent = a temp dir removed on close. */
  dataDir?: string;
}

/** A standalone ZooKeeper server (ZooKeeperServerMain) on 127.0.0.1, for tests and `shardcron dev`. */
export class ZooKeeperServer extends LocalServer {
  private constructor(port: number, child: ChildService, removeTemp: () => void) {
    super(port, child, removeTemp);
  }

  /** Starts a server and resolves once it answers `ruok` with `imok`. */
  static async start(options: ZooKeeperServerOptions = {}): Promise<ZooKeeperServer> {
    const install = findZooKeeper(options.env);
    const port = options.port || (await getFreePort());
    const temp = makeTempDir('shardcron-zk-');
    const dataDir = options.dataDir ?? path.join(temp.root, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    const cfg = writeConfig(temp.root, options, { dataDir, clientPort: port });
    const logger = (options.logger ?? silentLogger).child({ component: 'zookeeper-server', port });
    const child = new ChildService({
      name: 'zookeeper', command: install.java, port, logger, cwd: temp.root,
      args: javaArgs(install, temp.root, 'org.apache.zookeeper.server.ZooKeeperServerMain', cfg, options),
      isReady: async () => (await tcpExchange(port, 'ruok').catch(() => '')) === 'imok',
      startTimeoutMs: options.startTimeoutMs ?? 30_000,
    });
    return new ZooKeeperServer(port, child, temp.remove).boot();
  }

  /** `127.0.0.1:PORT`, for node-zookeeper-client. */
  get connectionString(): string { return `${LOOPBACK}:${this.port}`; }
}

/** One member of a {@link ZooKeeperEnsemble}. */
export interface ZooKeeperEnsembleMember {
  /** The member's `myid`, 1..size. */
  readonly id: number;
  readonly clientPort: number;
  /** Process id of the JVM while it runs. */
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Fault injection: SIGTERM, SIGKILL after 5 s. Keeps ports and data. */
  stop(): Promise<void>;
  /** Fault injection: SIGKILL now. Keeps ports and data. */
  kill(): Promise<void>;
  /** Stops the member if it runs, starts it again and waits until it is a leader or follower. */
  restart(): Promise<void>;
}

class EnsembleMember implements ZooKeeperEnsembleMember {
  constructor(readonly id: number, readonly clientPort: number, private readonly child: ChildService) {}
  get pid(): number | undefined { return this.child.pid; }
  get running(): boolean { return this.child.running; }
  stop(): Promise<void> { return this.child.stop(); }
  kill(): Promise<void> { return this.child.kill(); }
  async restart(): Promise<void> {
    await this.child.stop();
    await this.child.start();
  }
}

/** Options of {@link ZooKeeperEnsemble.start}. */
export interface ZooKeeperEnsembleOptions extends ZooKeeperTimingOptions {
  /** Number of members; default 3. */
  size?: number;
}

/** N ZooKeeper servers (QuorumPeerMain) forming one quorum on 127.0.0.1, for failover tests. */
export class ZooKeeperEnsemble {
  private closing: Promise<void> | undefined;

  private constructor(
    /** The members, in `myid` order. */
    readonly members: ReadonlyArray<ZooKeeperEnsembleMember>,
    private readonly removeTemp: () => void,
  ) {}

  /** Starts every member and resolves once each one reports `Mode: leader` or `Mode: follower`. */
  static async start(options: ZooKeeperEnsembleOptions = {}): Promise<ZooKeeperEnsemble> {
    const install = findZooKeeper(options.env);
    const size = options.size ?? 3;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`ensemble size must be a positive integer, got ${size}`);
    const ports = await getFreePorts(3 * size);
    const ids = Array.from({ length: size }, (_, i) => i + 1);
    const portsOf = (id: number) => ({ client: ports[3 * id - 3], quorum: ports[3 * id - 2], election: ports[3 * id - 1] });
    const servers = Object.fromEntries(
      ids.map((id) => [`server.${id}`, `${LOOPBACK}:${portsOf(id).quorum}:${portsOf(id).election}`]),
    );
    const temp = makeTempDir('shardcron-zk-ensemble-');
    const members = ids.map((id) => {
      const dir = path.join(temp.root, `member-${id}`);
      const dataDir = path.join(dir, 'data');
      const clientPort = portsOf(id).client;
      fs.mkdirSync(dataDir, { recursive: true });
      fs.writeFileSync(path.join(dataDir, 'myid'), `${id}\n`);
      const cfg = writeConfig(dir, options, {
        dataDir, clientPort, initLimit: 20, syncLimit: 10, standaloneEnabled: 'false', reconfigEnabled: 'false', ...servers,
      });
      const logger = (options.logger ?? silentLogger).child({ component: 'zookeeper-ensemble', member: id, port: clientPort });
      const child = new ChildService({
        name: `zookeeper member ${id}`, command: install.java, port: clientPort, logger, cwd: dir,
        args: javaArgs(install, dir, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', cfg, options),
        // `imok` comes before the member has joined a quorum; only a leader or follower serves clients.
        isReady: async () => ['leader', 'follower'].includes(await zooKeeperMode(clientPort)),
        startTimeoutMs: options.startTimeoutMs ?? 30_000,
      });
      return new EnsembleMember(id, clientPort, child);
    });
    const ensemble = new ZooKeeperEnsemble(members, temp.remove);
    const results = await Promise.allSettled(members.map((member) => member.restart()));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) {
      await ensemble.close();
      throw failed.reason;
    }
    return ensemble;
  }

  /** Every member's client address, `127.0.0.1:p1,127.0.0.1:p2,...`. */
  get connectionString(): string {
    return this.members.map((member) => `${LOOPBACK}:${member.clientPort}`).join(',');
  }

  /** The member's current role; `down` when it is stopped, not answering, or between elections. */
  async mode(memberId: number): Promise<ZooKeeperMode> {
    const member = this.members.find((m) => m.id === memberId);
    if (!member) throw new RangeError(`no ensemble member ${memberId} (members are 1..${this.members.length})`);
    return member.running ? zooKeeperMode(member.clientPort) : 'down';
  }

  /** Stops every member and removes the temp dirs; idempotent. */
  close(): Promise<void> { return (this.closing ??= this.doClose()); }

  /** Same as {@link close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> { return this.close(); }

  private async doClose(): Promise<void> {
    try { await Promise.allSettled(this.members.map((member) => member.stop())); } finally { this.removeTemp(); }
  }
}
