import { load as loadYaml } from 'js-yaml';
/**
 * docker-compose.yml and the Dockerfile against the configuration schema. Compose itself resolves the
 * file (anchors, merge keys, interpolation) and validates it against its own schema; the test then
 * reads the resolved services and checks what a deployment relies on: the services exist, workers and
 * schedulers can be scaled, every shardcron service reaches the compose ZooKeeper and Redis, and every
 * SHARDCRON_* variable passes loadEnvConfig(), so the file cannot drift from ENV_VARIABLES.
 * No image is built and no container started: there is no Docker engine in CI.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ENV_VARIABLES, isLoopbackHost, loadEnvConfig, type ShardcronEnvConfig } from '../../src/shared/config/env-config';

const ROOT = path.resolve(__dirname, '../..');
const COMPOSE_FILE = path.join(ROOT, 'docker-compose.yml');
const DOCKERFILE = path.join(ROOT, 'Dockerfile');
const DOCKERIGNORE = path.join(ROOT, '.dockerignore');
const COMMAND_TIMEOUT_MS = 30_000;

const KNOWN = new Set<string>(ENV_VARIABLES.map((v) => v.name));
/** SHARDCRON_JAVA and friends configure the local servers of `shardcron dev` and tests: meaningless in a container. */
const LOCAL_ONLY = new Set<string>(ENV_VARIABLES.filter((v) => v.description.startsWith('Local services only')).map((v) => v.name));

// ---------------------------------------------------------------------------------------------------
// Running compose: `docker compose` (v2 plugin) or `docker-compose` (v2 standalone, or Debian's v1).

interface ComposeCli {
  argv: string[];
  version: string;
  /** v2 prints `config --format json`; v1 only YAML. */
  json: boolean;
}

function run(argv: string[], env: NodeJS.ProcessEnv = process.env): SpawnSyncReturns<string> {
  return spawnSync(argv[0], argv.slice(1), { cwd: ROOT, env, encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS });
}

function findCompose(): ComposeCli {
  const tried: string[] = [];
  for (const argv of [['docker', 'compose'], ['docker-compose']]) {
    const result = run([...argv, 'version', '--short']);
    const version = result.stdout?.trim() ?? '';
    if (result.status === 0 && /^v?\d+\./.test(version)) return { argv, version, json: !/^v?1\./.test(version) };
    tried.push(`\`${argv.join(' ')} version\`: ${result.error?.message ?? (result.stderr?.trim() || `exit ${result.status}`)}`);
  }
  throw new Error(
    'Docker Compose is needed to validate docker-compose.yml and was not found. Install the Docker client ' +
      'with its compose plugin (`docker compose`), or on Debian `apt-get install --no-install-recommends docker-compose`. ' +
      `Tried: ${tried.join('; ')}`,
  );
}

/** The environment compose interpolates from: none of the caller's SHARDCRON_*, COMPOSE_* or the file's own knobs. */
function hermeticEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(SHARDCRON_|COMPOSE_)/.test(key) && !['CONSOLE_PORT', 'POSTGRES_PASSWORD'].includes(key)) env[key] = value;
  }
  return env;
}

/** An empty env file for --env-file: a developer's .env must not change what is checked (v1 refuses /dev/null). */
let emptyEnvFile: string | undefined;
afterAll(() => {
  if (emptyEnvFile) fs.rmSync(path.dirname(emptyEnvFile), { recursive: true, force: true });
});

function compose(cli: ComposeCli, args: string[]): SpawnSyncReturns<string> {
  if (!emptyEnvFile) {
    emptyEnvFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'shardcron-compose-')), 'empty.env');
    fs.writeFileSync(emptyEnvFile, '');
  }
  return run([...cli.argv, '--env-file', emptyEnvFile, '-f', COMPOSE_FILE, ...args], hermeticEnv());
}

// ---------------------------------------------------------------------------------------------------
// The resolved model, normalised over v1 (YAML, short forms) and v2 (JSON, long forms).

interface Port {
  target: number;
  published?: number;
  hostIp?: string;
}

interface Service {
  name: string;
  image?: string;
  build?: { context: string; dockerfile: string };
  environment: Record<string, string | undefined>;
  dependsOn: Record<string, string>;
  ports: Port[];
  replicas: number;
  raw: Record<string, unknown>;
}

function parsePort(port: unknown): Port {
  if (typeof port === 'object' && port !== null) {
    const p = port as { target: number | string; published?: number | string; host_ip?: string };
    return { target: Number(p.target), ...(p.published !== undefined && p.published !== '' && { published: Number(p.published) }), ...(p.host_ip && { hostIp: p.host_ip }) };
  }
  const parts = String(port).replace(/\/\w+$/, '').split(':');
  const target = Number(parts.pop());
  const published = parts.pop();
  return { target, ...(published && { published: Number(published) }), ...(parts.length > 0 && { hostIp: parts.join(':') }) };
}

function toEnvironment(env: unknown): Record<string, string | undefined> {
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((entry: string) => (entry.includes('=') ? [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] : [entry, undefined])));
  }
  return Object.fromEntries(Object.entries((env ?? {}) as Record<string, unknown>).map(([k, v]) => [k, v === null || v === undefined ? undefined : String(v)]));
}

function toService(name: string, raw: Record<string, unknown>): Service {
  const build = raw.build as { context?: string; dockerfile?: string } | string | undefined;
  const dependsOn = raw.depends_on as Record<string, { condition?: string }> | string[] | undefined;
  return {
    name,
    raw,
    ...(typeof raw.image === 'string' && { image: raw.image }),
    ...(build !== undefined && {
      build: typeof build === 'string' ? { context: build, dockerfile: 'Dockerfile' } : { context: build.context ?? '.', dockerfile: build.dockerfile ?? 'Dockerfile' },
    }),
    environment: toEnvironment(raw.environment),
    dependsOn: Array.isArray(dependsOn)
      ? Object.fromEntries(dependsOn.map((d) => [d, 'service_started']))
      : Object.fromEntries(Object.entries(dependsOn ?? {}).map(([d, v]) => [d, v?.condition ?? 'service_started'])),
    ports: ((raw.ports as unknown[]) ?? []).map(parsePort),
    replicas: Number((raw.deploy as { replicas?: number } | undefined)?.replicas ?? raw.scale ?? 1),
  };
}

/** Seconds of a compose duration: `45s`, `1m30s`, `500ms`, `1h`. */
function durationSeconds(value: unknown): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001, us: 1e-6 };
  const text = String(value);
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`not a compose duration: ${text}`);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * units[unit], 0);
}

const healthcheckText = (service: Service): string => [(service.raw.healthcheck as { test?: unknown } | undefined)?.test ?? []].flat().join(' ');

// ---------------------------------------------------------------------------------------------------

describe('docker-compose.yml', () => {
  let cli: ComposeCli;
  let services: Map<string, Service>;
  /** Services built from this repository's Dockerfile, with their shardcron configuration or why it is invalid. */
  let shardcron: Array<{ service: Service; config?: ShardcronEnvConfig; error?: string }>;

  beforeAll(() => {
    cli = findCompose();
    const result = compose(cli, cli.json ? ['config', '--format', 'json'] : ['config']);
    if (result.status !== 0) throw new Error(`${cli.argv.join(' ')} config failed (exit ${result.status}):\n${result.stderr}${result.error?.message ?? ''}`);
    let model: { services: Record<string, Record<string, unknown>> };
    if (cli.json) {
      model = JSON.parse(result.stdout);
    } else {
      // Compose v1 prints YAML only (js-yaml 4's load is the safe loader).
      model = loadYaml(result.stdout) as typeof model;
    }
    services = new Map(Object.entries(model.services).map(([name, raw]) => [name, toService(name, raw)]));
    shardcron = [...services.values()]
      .filter((s) => s.build !== undefined && path.resolve(ROOT, s.build.context) === ROOT)
      .map((service) => {
        // What the node itself runs at start: every SHARDCRON_* value validated, unknown names refused.
        try {
          return { service, config: loadEnvConfig(Object.fromEntries(Object.entries(service.environment).filter(([k]) => k.startsWith('SHARDCRON_')))) };
        } catch (err) {
          return { service, error: (err as Error).message };
        }
      });
  });

  /** Services whose configuration is valid and has `role` (invalid ones fail their own test). */
  const withRole = (role: string) =>
    shardcron.flatMap(({ service, config }) => (config?.roles.includes(role as never) ? [{ service, config }] : []));

  it('is valid for compose (config --quiet exits 0)', () => {
    const result = compose(cli, ['config', '--quiet']);
    expect({ status: result.status, stderr: result.stderr, error: result.error?.message }).toEqual(expect.objectContaining({ status: 0 }));
  });

  it('has zookeeper, redis, postgres, schedulers, a worker pool and a console; all shardcron services come from the Dockerfile', () => {
    expect([...services.keys()]).toEqual(expect.arrayContaining(['zookeeper', 'redis', 'postgres', 'worker', 'console']));
    expect(services.get('zookeeper')?.image).toMatch(/^zookeeper:3\.8/);
    expect(services.get('redis')?.image).toMatch(/^redis:7/);
    expect(services.get('postgres')?.image).toMatch(/^postgres:15/);
    // A service that sets SHARDCRON_* variables must run the shardcron image, and the other way round.
    const configured = [...services.values()].filter((s) => Object.keys(s.environment).some((k) => k.startsWith('SHARDCRON_'))).map((s) => s.name);
    expect(shardcron.map(({ service }) => service.name).sort()).toEqual(configured.sort());
    for (const { service } of shardcron) {
      expect({ name: service.name, dockerfile: service.build?.dockerfile, init: service.raw.init }).toEqual({ name: service.name, dockerfile: 'Dockerfile', init: true });
    }
    // At least two leader candidates (replicas of one service, or several services).
    expect(withRole('scheduler').reduce((n, { service }) => n + service.replicas, 0)).toBeGreaterThanOrEqual(2);
    expect(withRole('worker').map(({ service }) => service.name)).toContain('worker');
    expect(withRole('console').map(({ service }) => service.name)).toEqual(['console']);
  });

  it('lets workers and schedulers scale: no container_name, no host port, no fixed instance id or address', () => {
    // Roles as written (even where another variable is invalid), default as ENV_VARIABLES says.
    const defaultRoles = ENV_VARIABLES.find((v) => v.name === 'SHARDCRON_ROLES')?.default ?? '';
    const scalable = shardcron.filter(({ service }) =>
      (service.environment.SHARDCRON_ROLES ?? defaultRoles).split(',').some((r) => ['worker', 'scheduler'].includes(r.trim())));
    expect(scalable.map(({ service }) => service.name)).toEqual(expect.arrayContaining(['worker']));
    for (const { service } of scalable) {
      const networks = Object.values((service.raw.networks ?? {}) as Record<string, { ipv4_address?: string } | null>);
      expect({
        name: service.name,
        containerName: service.raw.container_name,
        hostPorts: service.ports.filter((p) => p.published !== undefined),
        instanceId: service.environment.SHARDCRON_INSTANCE_ID,
        fixedAddresses: networks.filter((n) => n?.ipv4_address),
      }).toEqual({ name: service.name, containerName: undefined, hostPorts: [], instanceId: undefined, fixedAddresses: [] });
    }
  });

  it('gives every shardcron service an environment that loadEnvConfig() accepts', () => {
    expect(shardcron.filter(({ error }) => error).map(({ service, error }) => `service ${service.name}: ${error}`)).toEqual([]);
  });

  it('uses only SHARDCRON_* variables that ENV_VARIABLES lists, and none of the local-services ones', () => {
    for (const service of services.values()) {
      const names = Object.keys(service.environment).filter((k) => k.toUpperCase().startsWith('SHARDCRON_'));
      expect({ service: service.name, unknown: names.filter((n) => !KNOWN.has(n)), localOnly: names.filter((n) => LOCAL_ONLY.has(n)) })
        .toEqual({ service: service.name, unknown: [], localOnly: [] });
    }
    // Variables the file interpolates from the host under a SHARDCRON_ name must be real ones too.
    const interpolated = [...fs.readFileSync(COMPOSE_FILE, 'utf8').matchAll(/\$\{(SHARDCRON_\w+)/g)].map((m) => m[1]);
    expect(interpolated.filter((n) => !KNOWN.has(n))).toEqual([]);
  });

  it('points every shardcron service at the compose ZooKeeper and Redis, and waits until they are healthy', () => {
    expect(shardcron.length).toBeGreaterThanOrEqual(3);
    for (const { service, config } of shardcron.flatMap((s) => (s.config ? [{ service: s.service, config: s.config }] : []))) {
      expect(service.environment.SHARDCRON_ZK).toBeDefined();
      expect(service.environment.SHARDCRON_REDIS_URL).toBeDefined();
      for (const server of config.zk.servers) {
        expect({ service: service.name, zk: server.host, image: services.get(server.host)?.image?.split(':')[0], port: server.port })
          .toEqual({ service: service.name, zk: server.host, image: 'zookeeper', port: 2181 });
      }
      const redis = new URL(config.redisUrl);
      expect({ service: service.name, image: services.get(redis.hostname)?.image?.split(':')[0], port: redis.port || '6379' })
        .toEqual({ service: service.name, image: 'redis', port: '6379' });
      const zkService = config.zk.servers[0].host;
      expect({ service: service.name, zk: service.dependsOn[zkService], redis: service.dependsOn[redis.hostname] })
        .toEqual({ service: service.name, zk: 'service_healthy', redis: 'service_healthy' });
    }
  });

  it('gives every depended-on service a health check and every service a restart policy', () => {
    for (const service of services.values()) {
      expect({ service: service.name, restart: service.raw.restart }).toEqual({ service: service.name, restart: expect.stringMatching(/^(always|unless-stopped|on-failure)/) });
      for (const [dependency, condition] of Object.entries(service.dependsOn)) {
        if (condition === 'service_healthy') expect({ dependency, test: healthcheckText(services.get(dependency)!) }).toEqual({ dependency, test: expect.stringMatching(/\S/) });
      }
    }
    const zk = services.get('zookeeper')!;
    expect(healthcheckText(zk)).toContain('ruok');
    expect(zk.environment.ZOO_4LW_COMMANDS_WHITELIST?.split(',').map((s) => s.trim())).toEqual(expect.arrayContaining([expect.stringMatching(/^(ruok|\*)$/)]));
    const redis = services.get('redis')!;
    expect(healthcheckText(redis)).toContain('redis-cli ping');
    // BullMQ requires that Redis never evicts its keys.
    expect([redis.raw.command ?? []].flat().join(' ')).toMatch(/--maxmemory-policy\s+noeviction/);
    expect(healthcheckText(services.get('postgres')!)).toContain('pg_isready');
  });

  it('runs the example jobs on workers, with their database, and a stop grace period longer than the drain', () => {
    for (const { service, config } of withRole('worker')) {
      const jobs = config.jobsModule ?? '';
      // The image compiles examples/*.ts to /app/examples/*.js (see the Dockerfile).
      const match = /^\/app\/examples\/(.+)\.js$/.exec(jobs);
      expect({ service: service.name, jobs: match ? jobs : `${jobs} (not /app/examples/*.js)` }).toEqual({ service: service.name, jobs });
      const source = path.join(ROOT, 'examples', `${match![1]}.ts`);
      expect({ SHARDCRON_JOBS: jobs, source, exists: fs.existsSync(source) }).toEqual({ SHARDCRON_JOBS: jobs, source, exists: true });

      const database = new URL(service.environment.DATABASE_URL ?? 'missing://');
      expect({ service: service.name, host: database.hostname, dependsOn: service.dependsOn[database.hostname] })
        .toEqual({ service: service.name, host: 'postgres', dependsOn: 'service_healthy' });

      expect(durationSeconds(service.raw.stop_grace_period ?? '10s')).toBeGreaterThan(config.shutdownGraceMs / 1000);
    }
  });

  it('publishes the console on its port, bound beyond loopback inside the container and therefore with a token', () => {
    const [{ service, config }] = withRole('console');
    expect(isLoopbackHost(config.ops.host)).toBe(false);
    expect(config.ops.token?.length).toBeGreaterThanOrEqual(16);
    expect(service.ports).toEqual([expect.objectContaining({ target: config.ops.port, published: expect.any(Number) })]);
  });
});

// ---------------------------------------------------------------------------------------------------

/** Dockerfile instructions (continuations joined, comments dropped), split into stages at each FROM. */
function dockerfileStages(): string[][] {
  const lines = fs.readFileSync(DOCKERFILE, 'utf8').split('\n').filter((l) => !/^\s*#/.test(l));
  const instructions = lines.join('\n').replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter(Boolean);
  const stages: string[][] = [];
  for (const instruction of instructions) {
    if (/^FROM\s/i.test(instruction)) stages.push([]);
    stages.at(-1)?.push(instruction);
  }
  return stages;
}

describe('Dockerfile', () => {
  const stages = dockerfileStages();
  const runtime = stages.at(-1) ?? [];
  const find = (keyword: string) => runtime.filter((i) => i.toUpperCase().startsWith(`${keyword} `));

  it('is multi-stage, with a Node 20 slim runtime', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const text = fs.readFileSync(DOCKERFILE, 'utf8');
    const image = runtime[0].split(/\s+/)[1].replace(/^\$\{?(\w+)\}?$/, (_, arg: string) => new RegExp(`^ARG ${arg}=(\\S+)`, 'm').exec(text)?.[1] ?? arg);
    expect(image).toMatch(/^node:20[\d.]*-(bookworm-)?slim$/);
  });

  it('runs as a non-root user with NODE_ENV=production, the shardcron entrypoint and a ping health check', () => {
    const user = find('USER').at(-1)?.split(/\s+/)[1];
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(find('ENV').join(' ')).toMatch(/NODE_ENV=production/);
    expect(find('ENTRYPOINT')).toEqual(['ENTRYPOINT ["node", "/app/bin/shardcron.js"]']);
    expect(find('CMD')).toEqual(['CMD ["start"]']);
    expect(find('HEALTHCHECK').join(' ')).toMatch(/CMD \["node", "\/app\/bin\/shardcron\.js", "ping"\]/);
    expect(find('LABEL').join(' ')).toContain('org.opencontainers.image.title');
  });

  it('copies from the build context only what .dockerignore lets in', () => {
    const ignore = fs.readFileSync(DOCKERIGNORE, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(ignore[0]).toBe('*'); // an allow-list: .env files and the like never reach the daemon
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
    const copied = stages.flat().filter((i) => /^COPY\s/i.test(i) && !/--from=/.test(i))
      .flatMap((i) => i.split(/\s+/).slice(1, -1).filter((a) => !a.startsWith('--')));
    expect(copied.length).toBeGreaterThan(0);
    expect(copied.map((c) => c.replace(/\/$/, '')).filter((c) => !allowed.includes(c))).toEqual([]);
  });
});
