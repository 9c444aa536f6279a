/**
 * `shardcron dev` on a machine without ZooKeeper or redis-server: install them with apt-get when
 * that is possible and allowed, else say exactly what is missing and how to install it.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { findExecutable } from '../dev/child-service';
import { findRedisServer } from '../dev/redis-server';
import { findZooKeeper } from '../dev/zookeeper-server';
import { ErrorCodes, ShardcronError } from '../shared/errors';

/** A local server `shardcron dev` needs and cannot find. */
export interface MissingServer {
  /** Debian package that provides it (ZooKeeper's depends on a Java runtime). */
  readonly debianPackage: 'zookeeper' | 'redis-server';
  /** The MISSING_DEPENDENCY error of findZooKeeper / findRedisServer: what is missing, how to install it. */
  readonly error: ShardcronError;
}

/** The facts {@link planInstall} decides on. */
export interface InstallFacts {
  missing: readonly MissingServer[];
  isRoot: boolean;
  hasAptGet: boolean;
  /** `--no-install` was given. */
  noInstall: boolean;
  /** SHARDCRON_JAVA, SHARDCRON_ZK_CLASSPATH or SHARDCRON_REDIS_SERVER is set: the user chose an installation. */
  customInstallation: boolean;
}

/** What to do: run apt-get for these packages, or give up with the reason why not. */
export type InstallPlan = { action: 'install'; packages: string[]; commands: string[][] } | { action: 'refuse'; why: string };

/** Decides whether to install the missing servers. Pure. */
export function planInstall(facts: InstallFacts): InstallPlan {
  if (facts.noInstall) return { action: 'refuse', why: '--no-install was given' };
  if (facts.customInstallation) return { action: 'refuse', why: 'SHARDCRON_JAVA, SHARDCRON_ZK_CLASSPATH or SHARDCRON_REDIS_SERVER points at an installation of your own' };
  if (!facts.hasAptGet) return { action: 'refuse', why: 'apt-get is not available (installing is supported on Debian and Ubuntu)' };
  if (!facts.isRoot) return { action: 'refuse', why: 'not running as root (run the command below with sudo, then shardcron dev again)' };
  const packages = [...new Set(facts.missing.map((m) => m.debianPackage))];
  return { action: 'install', packages, commands: [['apt-get', 'update'], ['apt-get', 'install', '-y', ...packages]] };
}

/** The servers that `needed` names and that are not installed, each with findX()'s message. */
export function findMissingServers(needed: { zookeeper: boolean; redis: boolean }, env: NodeJS.ProcessEnv): MissingServer[] {
  const missing: MissingServer[] = [];
  const check = (debianPackage: MissingServer['debianPackage'], find: () => unknown) => {
    try {
      find();
    } catch (err) {
      if (!(err instanceof ShardcronError && err.code === ErrorCodes.MISSING_DEPENDENCY)) throw err;
      missing.push({ debianPackage, error: err });
    }
  };
  if (needed.zookeeper) check('zookeeper', () => findZooKeeper(env));
  if (needed.redis) check('redis-server', () => findRedisServer(env));
  return missing;
}

/** The facts of this machine and environment. */
export function installFacts(missing: readonly MissingServer[], noInstall: boolean, env: NodeJS.ProcessEnv): InstallFacts {
  return {
    missing,
    noInstall,
    isRoot: process.getuid?.() === 0,
    hasAptGet: findExecutable('apt-get', env) !== undefined,
    customInstallation: Boolean(env.SHARDCRON_JAVA || env.SHARDCRON_ZK_CLASSPATH || env.SHARDCRON_REDIS_SERVER),
  };
}

function run(command: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command[0], command.slice(1), { stdio: ['ignore', 'inherit', 'inherit'], env });
    child.once('error', () => resolve(127));
    child.once('close', (code) => resolve(code ?? 1));
  });
}

/** Where Debian looks before starting a service from a package's install script. */
const POLICY_RC_D = '/usr/sbin/policy-rc.d';

/**
 * Runs the plan's commands, printing each one. Returns true when every command succeeded.
 * Package scripts must not start a system-wide redis-server on port 6379 that nobody asked for
 * (and that `dev` would then leave behind), so a policy-rc.d that forbids it is in place meanwhile.
 */
export async function runInstall(plan: Extract<InstallPlan, { action: 'install' }>, print: (line: string) => void): Promise<boolean> {
  const ownPolicy = !fs.existsSync(POLICY_RC_D);
  if (ownPolicy) fs.writeFileSync(POLICY_RC_D, '#!/bin/sh\n# shardcron dev: no service starts during its apt-get install\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    for (const command of plan.commands) {
      print(`$ ${command.join(' ')}`);
      const code = await run(command, env);
      if (code !== 0) {
        print(`${command.join(' ')} failed with exit code ${code}`);
        return false;
      }
    }
    return true;
  } finally {
    if (ownPolicy) fs.rmSync(POLICY_RC_D, { force: true });
  }
}
